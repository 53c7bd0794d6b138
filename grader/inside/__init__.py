"""What runs inside the sandbox: the zygote (zygote.py), its confinement (confine.py,
syscalls.py, slot_cgroup.py), the child that runs a submission (harness.py, tracer.py),
the frames it speaks (protocol.py) and the probes' helpers (probekit.py).

Nothing here may import anything but the standard library, torch and this folder
(tests/unit/test_inside_imports.py): inside bubblewrap only this folder is bound,
and the trusted side's modules (its references, hidden tests, verdicts) must never
reach the student's process. The trusted side imports from here (protocol, tracer,
probekit), never the other way round.
"""
