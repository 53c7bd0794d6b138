"""Getting out of the sandbox: reading what the grader holds (solution, hidden tests,
other students' work, environment secrets), writing outside the scratch dir, reaching
the network, and passing data from one submission to the next on the same slot.

Each attack is written to behave like the honest solution when it finds nothing and
to fail its part with "LEAK: …" (what it found) when it succeeds; so full marks mean
the attack got nothing, and a failure shows exactly what got out. Attacks that must
report what they saw (the environment) fail one part on purpose.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import threading
from pathlib import Path

import pytest

from conftest import (FULL, GUARDED, HIDDEN, PARTS, REPO, SOLUTION,
                      assert_honest_still_full, digests, failed_messages, grade_all,
                      hostile, lost, no_marker, open_slot, require_sandbox,
                      wait_no_processes)

SECRET_NAME = "GRADER_ADVERSARIAL_SECRET"
SECRET = "s3cret-" + secrets.token_hex(8)
CAROL_MARK = "CAROL-PRIVATE-" + secrets.token_hex(6)
VENV_TORCH = Path(sys.prefix) / "lib"


class Listener:
    """A real server on the host; counts every connection or datagram it receives."""

    def __init__(self, family: int, kind: int, address):
        self.sock = socket.socket(family, kind)
        self.sock.bind(address)
        self.kind = kind
        if kind == socket.SOCK_STREAM:
            self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.hits = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def address(self):
        return self.sock.getsockname()

    def _run(self) -> None:
        while not self.stop:
            try:
                if self.kind == socket.SOCK_STREAM:
                    conn, _ = self.sock.accept()
                    conn.close()
                else:
                    self.sock.recvfrom(4096)
                self.hits += 1
            except (socket.timeout, OSError):
                continue

    def close(self) -> None:
        self.stop = True
        self.thread.join(timeout=2)
        self.sock.close()


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """Things on the host a submission must not reach: a victim file, listeners, a secret."""
    require_sandbox()
    root = tmp_path_factory.mktemp("host")
    victim = root / "victim.txt"
    victim.write_text("untouched\n")
    tcp = Listener(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
    udp = Listener(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
    abstract_name = "\0grader-adversarial-" + secrets.token_hex(4)
    abstract = Listener(socket.AF_UNIX, socket.SOCK_STREAM, abstract_name)
    unix_path = str(root / "host.sock")
    unix = Listener(socket.AF_UNIX, socket.SOCK_STREAM, unix_path)
    old = os.environ.get(SECRET_NAME)
    os.environ[SECRET_NAME] = SECRET  # before the slot starts: bwrap gets this env
    facts = {"root": root, "victim": victim, "tcp": tcp, "udp": udp, "abstract": abstract,
             "abstract_name": abstract_name, "unix": unix, "unix_path": unix_path,
             "fake_report": REPO / "out" / "13" / "results" / "pwned.json",
             "venv_file": next(VENV_TORCH.glob("python3*/site-packages/torch/__init__.py"))}
    facts["watched"] = GUARDED + [victim, facts["venv_file"]]
    facts["before"] = digests(facts["watched"])
    yield facts
    for listener in (tcp, udp, abstract, unix):
        listener.close()
    if old is None:
        os.environ.pop(SECRET_NAME, None)
    else:
        os.environ[SECRET_NAME] = old


@pytest.fixture(scope="module")
def slot(course, host):
    s = open_slot(course)
    yield s
    s.close()
    assert wait_no_processes(uids=[s.uid]) == []


def _sources(host: dict, subs_root: Path) -> dict[str, str]:
    paths = {
        "solution": str(SOLUTION), "hidden test": str(HIDDEN / "test_dispatch.py"),
        "mistakes": str(HIDDEN / "mistakes.yml"), "course": str(REPO / "course.yml"),
        "alice (examples)": str(REPO / "examples" / "13" / "alice" / "13_moe.py"),
        "carol (this run)": str(subs_root / "carol" / "13_moe.py"),
        "victim": str(host["victim"]), "shadow": "/etc/shadow",
        "root history": "/root/.bash_history",
    }
    markers = {"solution text": "### BEGIN SOLUTION", "hidden test text": "from _inputs import",
               "carol's file": CAROL_MARK, "secret": SECRET}
    # The secret is in the attack only to recognise it: it is never in the environment
    # the attack sees unless the sandbox leaks it.
    read = hostile(at_import=f'''
        import os
        PATHS = {paths!r}
        MARKERS = {markers!r}
        def _hunt():
            found = []
            for what, p in PATHS.items():
                try:
                    with open(p, "rb") as f:
                        found.append(f"read {{what}} at {{p}}: {{f.read(60)!r}}")
                except OSError:
                    pass
            # guessing: walk the whole visible tree (not the interpreter's own
            # libraries) and grep every small file for the solution, tests, carol
            skip = ("/proc", "/sys", "/dev", "/usr", "/tmp/work")
            for top, dirs, files in os.walk("/"):
                dirs[:] = [d for d in dirs if d not in ("site-packages", "dist-packages")
                           and not os.path.join(top, d).startswith(skip)]
                for name in files:
                    p = os.path.join(top, name)
                    if "13_moe" in name or name in ("mistakes.yml", "course.yml",
                                                   "test_dispatch.py", "_inputs.py"):
                        found.append(f"file {{p}}")
                    try:
                        if os.path.getsize(p) < 1_000_000:
                            data = open(p, "rb").read().decode(errors="ignore")
                            found += [f"{{m}} in {{p}}" for m, s in MARKERS.items() if s in data]
                    except OSError:
                        pass
            for pid in filter(str.isdigit, os.listdir("/proc")):
                for part in ("environ", "cmdline"):
                    try:
                        data = open(f"/proc/{{pid}}/{{part}}", "rb").read().decode(errors="ignore")
                    except OSError:
                        continue
                    found += [f"{{m}} in /proc/{{pid}}/{{part}}" for m, s in MARKERS.items()
                              if s in data]
                for link in ("root", "cwd"):
                    try:
                        os.listdir(f"/proc/{{pid}}/{{link}}{REPO}")
                        if pid != str(os.getpid()):
                            found.append(f"/proc/{{pid}}/{{link}} leads to the host")
                    except OSError:
                        pass
            found += [f"env {{k}}" for k, v in os.environ.items() if MARKERS["secret"] in v]
            return found
        _FOUND = _hunt()
    ''', dispatch='''
        if _FOUND:
            raise RuntimeError(f"LEAK: {_FOUND}")
    ''')

    env = hostile(load_balancing_loss='''
        import os, json
        seen = {"environ": dict(os.environ), "me": os.getpid(),
                "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
        for pid in sorted(set(seen["pids"]) | {1}):  # the slot's, listed or not
            p = f"/proc/{pid}/environ"
            try:
                seen[p] = open(p, "rb").read().decode(errors="replace")
            except OSError as e:
                seen[p] = type(e).__name__
        raise RuntimeError("ENV:" + json.dumps(seen, sort_keys=True))
    ''')

    targets = {
        "victim": str(host["victim"]), "solution": str(SOLUTION),
        "hidden test": str(HIDDEN / "test_dispatch.py"), "course": str(REPO / "course.yml"),
        "fake report": str(host["fake_report"]), "venv torch": str(host["venv_file"]),
        "sandbox server": "/grader/grader/inside/zygote.py",
        "sandbox confinement": "/grader/grader/inside/confine.py",
        "sandbox harness": "/grader/grader/inside/harness.py", "probes": "/grader/probes.py",
        "tmp": "/tmp/planted", "dev shm": "/dev/shm/planted", "root dir": "/planted",
        "usr": "/usr/lib/planted",
    }
    write = hostile(dispatch=f'''
        import os
        TARGETS = {targets!r}
        wrote = []
        def _try(what, fn):
            try:
                fn()
                wrote.append(what)
            except OSError:
                pass
        for what, p in TARGETS.items():
            _try(what, lambda: open(p, "w").write("pwned"))
            _try(what + " (append)", lambda: open(p, "a").write("pwned"))
            _try(what + " (chmod)", lambda: os.chmod(p, 0o777))
            _try(what + " (rename)", lambda: os.rename(p, p + ".gone"))
            # through a symlink made in the scratch dir, and a hard link
            link = "/tmp/work/link-" + what.replace(" ", "_")
            try:
                os.symlink(p, link)
            except OSError:
                pass
            _try(what + " (symlink)", lambda: open(link, "w").write("pwned"))
            _try(what + " (hardlink)", lambda: os.link(p, link + ".hard"))
        _try("make dirs", lambda: os.makedirs({str(host["fake_report"].parent)!r}))
        # the scratch dir itself works (else the checks above prove nothing)
        open("/tmp/work/ok.txt", "w").write("fine")
        if wrote:
            raise RuntimeError(f"LEAK: wrote {{wrote}}")
    ''', route='''
        import errno, os
        # one file over the file-size limit, then the scratch tmpfs over its size
        seen = set()
        try:
            with open("/tmp/work/big", "wb") as f:
                f.write(b"x" * (9 * 2 ** 20))
        except OSError as e:
            seen.add(e.errno)
        for i in range(6):
            try:
                with open(f"/tmp/work/fill{i}", "wb") as f:
                    f.write(b"x" * (7 * 2 ** 20))
            except OSError as e:
                seen.add(e.errno)
        for i in range(5000):  # and its inode cap
            try:
                open(f"/tmp/work/n{i}", "w").close()
            except OSError as e:
                seen.add(e.errno)
                break
        for name in os.listdir("/tmp/work"):
            if name.startswith(("big", "fill", "n")):
                os.unlink("/tmp/work/" + name)
        if seen != {errno.EFBIG, errno.ENOSPC}:
            raise RuntimeError(f"LEAK: file limits did not hold: {seen}")
    ''')

    tcp_port = host["tcp"].address[1]
    udp_port = host["udp"].address[1]
    net = hostile(dispatch=f'''
        import socket
        got = []
        def _connect(what, family, addr, timeout=0.5):
            try:  # the syscall allowlist refuses any socket but a Unix one
                s = socket.socket(family, socket.SOCK_STREAM)
            except OSError:
                return
            s.settimeout(timeout)
            try:
                s.connect(addr)
                got.append(what)
            except OSError:
                pass
            finally:
                s.close()
        _connect("host loopback tcp", socket.AF_INET, ("127.0.0.1", {tcp_port}))
        _connect("host loopback tcp6", socket.AF_INET6, ("::1", {tcp_port}))
        _connect("abstract unix socket", socket.AF_UNIX, {host["abstract_name"]!r})
        _connect("unix socket file", socket.AF_UNIX, {host["unix_path"]!r})
        _connect("private 10.x", socket.AF_INET, ("10.255.255.1", 80))
        _connect("TEST-NET 192.0.2.1", socket.AF_INET, ("192.0.2.1", 80))
        try:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.sendto(b"hello", ("127.0.0.1", {udp_port}))
            u.sendto(b"hello", ("192.0.2.1", 53))
        except OSError:
            pass
        try:
            socket.getaddrinfo("example.com", 80)
            got.append("DNS")
        except OSError:
            pass
        ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]
        if ifaces != ["lo"]:
            got.append(f"interfaces {{ifaces}}")
        if got:
            raise RuntimeError(f"LEAK: reached {{got}}")
    ''')

    # One student plants data on the slot; the next one, same uid, looks for it.
    plant = hostile(at_import=f'''
        import ctypes, os
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.shmat.restype = ctypes.c_void_p
        _MSG = b"PLANTED-BY-MALLORY {CAROL_MARK}"
        for _p in ("/tmp/planted", "/dev/shm/planted", "/tmp/work/../planted"):
            try:
                open(_p, "wb").write(_MSG)
            except OSError:
                pass
        _id = _libc.shmget(0x6d616c6c, 4096, 0o1666)  # IPC_CREAT | 0666
        if _id >= 0:
            _addr = _libc.shmat(_id, None, 0)
            ctypes.memmove(_addr, _MSG, len(_MSG))
            _libc.shmdt(ctypes.c_void_p(_addr))
        _q = _libc.msgget(0x6d616c6c, 0o1666)
        if _q >= 0:
            _buf = ctypes.create_string_buffer(8 + len(_MSG))
            ctypes.memmove(ctypes.addressof(_buf), (1).to_bytes(8, "little") + _MSG, 8 + len(_MSG))
            _libc.msgsnd(_q, _buf, len(_MSG), 0o4000)  # IPC_NOWAIT
    ''')
    pick = hostile(dispatch='''
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        found = []
        for p in ("/tmp/planted", "/dev/shm/planted", "/planted"):
            if os.path.exists(p):
                found.append(p)
        for kind in ("shm", "msg", "sem"):
            rows = open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
            if rows:
                found.append(f"sysv {kind}: {rows}")
        sid = libc.shmget(0x6d616c6c, 0, 0)
        if sid >= 0:
            addr = libc.shmat(sid, None, 0o10000)  # SHM_RDONLY
            found.append(ctypes.string_at(addr, 60))
        if found:
            raise RuntimeError(f"LEAK: left by an earlier student: {found}")
    ''')
    carol = SOLUTION.read_text() + f"\n# {CAROL_MARK}\n"
    return {"carol": carol, "read": read, "env": env, "write": write, "net": net,
            "plant": plant, "pick": pick}


@pytest.fixture(scope="module")
def records(course, slot, host, tmp_path_factory):
    root = tmp_path_factory.mktemp("escape")
    return grade_all(course, slot, root, _sources(host, root))


def no_leak(record: dict) -> None:
    leaks = [m for m in failed_messages(record) if "LEAK" in m]
    assert not leaks, leaks[0][:3000]
    assert record["score"] == FULL, failed_messages(record)[:3]


def test_honest_neighbour(records):
    assert records["carol"]["score"] == FULL


def test_cannot_read_solution_tests_or_other_students(records):
    no_leak(records["read"])


def test_environment_is_cleared(records):
    rec = records["env"]
    assert lost(rec) == {"aux_loss": PARTS["aux_loss"]}
    msg = failed_messages(rec, "aux_loss")[0]
    assert SECRET not in msg and SECRET_NAME not in msg
    seen = json.loads(msg.removeprefix("RuntimeError: ENV:"))
    assert set(seen["environ"]) <= {"PATH", "HOME", "OMP_NUM_THREADS", "PYTHONDONTWRITEBYTECODE",
                                    "PYTHONHASHSEED", "LC_CTYPE", "PWD", "TMPDIR",
                                    "LD_LIBRARY_PATH"}, seen["environ"]
    # (the interpreter's installation at its neutral path, for its libpython: bwrap.py)
    assert seen["environ"].get("LD_LIBRARY_PATH", "/python/lib") == "/python/lib"
    assert seen["environ"]["HOME"] == seen["environ"]["TMPDIR"] == "/tmp/work"
    # Its /proc (hidepid=2) shows itself alone: not its slot's server (pid 1), the
    # sandbox's zygote, another slot, or anything of the host.
    assert seen["pids"] == [seen["me"]]
    assert seen["/proc/1/environ"] in ("PermissionError", "FileNotFoundError")


def test_cannot_write_outside_scratch(records, host):
    no_leak(records["write"])
    assert digests(host["watched"]) == host["before"]
    assert no_marker() == []
    assert not host["fake_report"].exists()
    assert [p.name for p in host["root"].iterdir()] == ["victim.txt", "host.sock"] or \
        sorted(p.name for p in host["root"].iterdir()) == ["host.sock", "victim.txt"]


def test_no_network(records, host):
    no_leak(records["net"])
    for name in ("tcp", "udp", "abstract", "unix"):
        assert host[name].hits == 0, f"the host's {name} listener was reached"


def test_nothing_passes_between_submissions(records):
    assert records["plant"]["score"] == FULL
    no_leak(records["pick"])


def test_grader_unharmed(records, slot, course, tmp_path, host):
    assert slot.alive()
    assert digests(host["watched"]) == host["before"]
    assert_honest_still_full(course, slot, tmp_path)
