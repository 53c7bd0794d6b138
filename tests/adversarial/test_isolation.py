"""Nothing the TA's process holds reaches a child, and nothing passes between
students: no keyring (the TA's session keys, or a key one student leaves for the
next), no network shared by two slots (loopback, abstract unix sockets), no
capability, and no file descriptor beyond the child's own channel and output.

Each attack reports what it saw in an exception message (`REPORT:{json}`), read
back from the record or the session's error.
"""
from __future__ import annotations

import ctypes
import json
import os
import threading

import pytest

from conftest import (FULL, LESSON, SOLUTION, failed_messages, grade_all, hostile,
                      require_sandbox, slot_processes)
from grader.sandbox import slot as slots
from grader.sandbox.limits import StudentError
from grader.sandbox.session import Session

KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_SEARCH, KEYCTL_READ = 1, 10, 11
SESSION_KEYRING = -3
TA_KEY, TA_SECRET = "minimind-ta-secret", b"CANVAS_API_TOKEN=not-for-students"
PORT = 47613

# Shared by the attacks: the key syscalls by number, as the student would call them.
KEYS = f'''
import ctypes, json, os
_libc = ctypes.CDLL(None, use_errno=True)
_ADD_KEY, _KEYCTL = {KEYCTL.get(os.uname().machine, (-1, -1))!r}
def _search(ring, description):
    key = _libc.syscall(_KEYCTL, {KEYCTL_SEARCH}, ring, b"user", description.encode(), 0)
    return key if key >= 0 else -ctypes.get_errno()
def _read(key):
    buf = ctypes.create_string_buffer(256)
    n = _libc.syscall(_KEYCTL, {KEYCTL_READ}, key, buf, 256)
    return buf.raw[:n].decode(errors="replace") if n >= 0 else -ctypes.get_errno()
def _proc_keys():
    return open("/proc/keys").read()
'''

READ_TA_KEY = hostile(at_import=KEYS, dispatch=f'''
    found = _search({SESSION_KEYRING}, {TA_KEY!r})
    report = {{"search": found, "read": _read(found) if found > 0 else None,
              "proc_keys": {TA_KEY!r} in _proc_keys()}}
    raise RuntimeError("REPORT:" + json.dumps(report))
''')

# Keys put where they outlive the child: the uid's user and user-session keyrings.
LEAVE_KEY = hostile(at_import=KEYS, dispatch='''
    added = {}
    for ring in (-4, -5, -3):  # @u, @us, @s
        key = _libc.syscall(_ADD_KEY, b"user", b"minimind-left-behind", b"hello", 5, ring)
        added[ring] = key if key >= 0 else -ctypes.get_errno()
    raise RuntimeError("REPORT:" + json.dumps(added))
''')

FIND_LEFT_KEY = hostile(at_import=KEYS, dispatch='''
    found = {ring: _search(ring, "minimind-left-behind") for ring in (-4, -5, -3)}
    report = {"found": found, "proc_keys": "minimind-left-behind" in _proc_keys()}
    raise RuntimeError("REPORT:" + json.dumps(report))
''')

INHERITED = hostile(dispatch='''
    import json, os
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
                  if ":\\t" in line)
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    kinds = {}
    for fd in fds:
        try:
            kinds[fd] = os.readlink(f"/proc/self/fd/{fd}").split(":")[0]
        except OSError:
            pass  # the listing's own descriptor, closed by now
    report = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                                             "NoNewPrivs", "Seccomp")}
    report["fds"] = kinds
    raise RuntimeError("REPORT:" + json.dumps(report))
''')

LISTENER = f'''
import json, select, socket, time
report = {{"heard": []}}
try:
    tcp = socket.create_server(("127.0.0.1", {PORT}))
    report["tcp"] = "listening"
except OSError as e:
    tcp, report["tcp"] = None, f"errno {{e.errno}}"
unix = socket.socket(socket.AF_UNIX)
unix.bind("\\0minimind-chat")
unix.listen()
probe = socket.socket(socket.AF_UNIX)
probe.connect("\\0minimind-chat")  # the control: the socket works from this process
unix.accept()[0].close()
report["abstract_self"] = "ok"
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    ready, _, _ = select.select([s for s in (unix, tcp) if s], [], [], 0.1)
    for s in ready:
        s.accept()[0].close()
        report["heard"].append("tcp" if s is tcp else "abstract")
raise RuntimeError("REPORT:" + json.dumps(report))
'''

TALKER = f'''
import json, socket, time
report = {{"reached": []}}
deadline = time.monotonic() + 3
while time.monotonic() < deadline and not report["reached"]:
    for family, address, name in ((socket.AF_UNIX, "\\0minimind-chat", "abstract"),
                                  (socket.AF_INET, ("127.0.0.1", {PORT}), "tcp")):
        try:  # socket() itself is refused for any family but AF_UNIX
            s = socket.socket(family)
        except OSError as e:
            report[name] = f"errno {{e.errno}}"
            continue
        try:
            s.connect(address)
            report["reached"].append(name)
        except OSError as e:
            report[name] = f"errno {{e.errno}}"
        finally:
            s.close()
    time.sleep(0.1)
raise RuntimeError("REPORT:" + json.dumps(report))
'''


def keyctl(*args) -> int:
    _, nr = KEYCTL[os.uname().machine]
    return libc.syscall(nr, *args)


libc = ctypes.CDLL(None, use_errno=True)


def report(message: str) -> dict:
    assert "REPORT:" in message, message
    return json.loads(message[message.index("REPORT:") + 7:])


def dispatch_report(record: dict) -> dict:
    messages = failed_messages(record, "dispatch")
    assert messages, "the attack did not run"
    return report(messages[0])


@pytest.fixture(scope="module")
def sandbox(course):
    """A sandbox started from a TA session that holds a secret key, as a login shell
    (pam_keyinit) would give it."""
    require_sandbox()
    if os.uname().machine not in KEYCTL:
        pytest.skip("key syscall numbers known for x86_64 and aarch64 only")
    if keyctl(KEYCTL_JOIN_SESSION_KEYRING, b"minimind-ta-session") < 0:
        pytest.skip(f"no session keyring here (errno {ctypes.get_errno()})")
    add_key, _ = KEYCTL[os.uname().machine]
    key = libc.syscall(add_key, b"user", TA_KEY.encode(), TA_SECRET, len(TA_SECRET),
                       SESSION_KEYRING)
    assert key > 0, ctypes.get_errno()
    lesson = course.lesson(LESSON)
    box = slots.Sandbox(course.path(lesson.probes), True, tuple(lesson.preload))
    yield box
    box.close()


@pytest.fixture(scope="module")
def two_slots(sandbox):
    pair = sandbox.slot(), sandbox.slot()
    yield pair
    for s in pair:
        s.close()


def test_the_ta_key_is_there_for_the_ta(sandbox):
    found = keyctl(KEYCTL_SEARCH, SESSION_KEYRING, b"user", TA_KEY.encode(), 0)
    assert found > 0  # the simulation holds: this process (and bwrap's parent) has it


def test_ta_session_key_is_out_of_reach(course, two_slots, tmp_path):
    rec = grade_all(course, two_slots[0], tmp_path, {"reader": READ_TA_KEY})["reader"]
    seen = dispatch_report(rec)
    assert seen["search"] == -1, seen  # EPERM: the filter refuses keyctl
    assert seen["read"] is None and not seen["proc_keys"], seen
    assert TA_SECRET.decode() not in json.dumps(rec)


def test_a_key_left_behind_does_not_reach_the_next_student(course, two_slots, tmp_path):
    recs = grade_all(course, two_slots[0], tmp_path,
                     {"leaver": LEAVE_KEY, "finder": FIND_LEFT_KEY})
    added = dispatch_report(recs["leaver"])
    assert set(added.values()) == {-1}, added  # EPERM on every keyring
    found = dispatch_report(recs["finder"])
    assert all(v < 0 for v in found["found"].values()) and not found["proc_keys"], found


def test_child_inherits_no_capability_and_no_stray_descriptor(course, two_slots, tmp_path):
    seen = dispatch_report(grade_all(course, two_slots[1], tmp_path,
                                     {"inherited": INHERITED})["inherited"])
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(seen[name], 16) == 0, (name, seen)
    assert (seen["NoNewPrivs"], seen["Seccomp"]) == ("1", "2"), seen
    # stdin (/dev/null), stdout and stderr (the output pipe), the channel: nothing else
    fds = seen["fds"]
    assert [fds.pop(k) for k in ("0", "1", "2")] == ["/dev/null", "pipe", "pipe"], seen
    assert list(fds.values()) == ["socket"], seen


def _import_report(slot, source: str, limits, allowed, out: dict, name: str) -> None:
    session = Session(slot, source, "13_moe.py", allowed, limits)
    try:
        session.call("no-such-probe", {})
    except StudentError as exc:
        out[name] = report(exc.message)
    finally:
        session.close()


def test_two_students_at_once_cannot_talk(course, two_slots):
    lesson = course.lesson(LESSON)
    limits, out = course.limits(LESSON), {}
    threads = [threading.Thread(target=_import_report,
                                args=(s, src, limits, lesson.provides, out, name))
               for s, src, name in ((two_slots[0], LISTENER, "listener"),
                                    (two_slots[1], TALKER, "talker"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    listener, talker = out["listener"], out["talker"]
    assert listener["abstract_self"] == "ok", listener  # the channel works within a slot
    assert listener["heard"] == [] and talker["reached"] == [], (listener, talker)


def test_a_slot_opened_after_another_closed_grades_under_a_uid_of_its_own(course, sandbox,
                                                                          tmp_path):
    """A sandbox that opens a slot after closing one (the tests' shared sandbox does):
    the new slot's memory cgroup is named for its uid, so that uid must be new to the
    sandbox; the old code handed the closed slot's uid again, and the new slot died
    making its cgroup."""
    first = sandbox.slot()
    try:
        rec = grade_all(course, first, tmp_path / "first", {"a": SOLUTION.read_text()})["a"]
    finally:
        first.close()
    second = sandbox.slot()
    try:
        again = grade_all(course, second, tmp_path / "second", {"b": SOLUTION.read_text()})["b"]
    finally:
        second.close()
    assert second.uid != first.uid
    assert (rec["score"], again["score"]) == (FULL, FULL), again



def test_a_closed_slot_has_cleaned_up_when_close_returns(course, sandbox):
    """A slot's uid is freed when it closes, and another run may claim it at once: the
    slot's cleanup must be over by then (in container mode it removes what the uid owns
    in the shared folders, which would be the next holder's scratch too). The old close
    returned at once: the student's process, which the slot kills as it ends, still ran."""
    lesson = course.lesson(LESSON)
    slot = sandbox.slot()
    session = Session(slot, SOLUTION.read_text(), "13_moe.py", lesson.provides,
                      course.limits(LESSON))
    try:
        with pytest.raises(StudentError):  # imported, answered, and still running
            session.call("no-such-probe", {})
        assert slot_processes(slot)
        slot.close()
        assert slot_processes(slot) == []
    finally:
        session.sock.close()
