"""Nothing of one student survives into the next, or past the run, and the scratch cap
holds, in every mode (above all container mode, where no mount namespace or tmpfs can
be had: the child may write only beneath its scratch folder, Landlock permitting; the
slot measures that folder while the child runs and, after it, removes whatever the
child's uid owns in the machine's shared folders and its SysV IPC objects).

A planting student writes a marker file in every folder any uid may write to (and in a
world-writable folder inside /tmp that this test makes), and tries SysV shared memory,
a message queue and a semaphore set, and a POSIX message queue; the next student on the
same slot, and a later run, look for all of it.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

import modes
from conftest import SOLUTION, require_sandbox
from grader.inside import confine

TAG = "mmg-left-" + secrets.token_hex(4)
KEY = int.from_bytes(secrets.token_bytes(3), "big") | 0x1000000  # a SysV key of ours
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")

PLANT = r'''
import ctypes as _c, os as _o
_libc = _c.CDLL(None, use_errno=True)
_libc.shmat.restype = _c.c_void_p
_said = {{}}
for _d in {folders!r}:
    try:
        with open(_o.path.join(_d, {tag!r}), "w") as _f:
            _f.write("planted")
        _said[_d] = "written"
    except OSError as _x:
        _said[_d] = type(_x).__name__
try:
    _o.mkdir("/dev/shm/{tag}.d")
    open("/dev/shm/{tag}.d/inside", "w").write("planted")
    _said["dir"] = "written"
except OSError as _x:
    _said["dir"] = type(_x).__name__
_id = _libc.shmget({key}, 4096, 0o1666)
_said["shm"] = "made" if _id >= 0 else _c.get_errno()
if _id >= 0:
    _a = _libc.shmat(_id, None, 0)
    _c.memmove(_a, b"planted", 7)
_said["msg"] = "made" if _libc.msgget({key}, 0o1666) >= 0 else _c.get_errno()
_said["sem"] = "made" if _libc.semget({key}, 1, 0o1666) >= 0 else _c.get_errno()
_said["mq"] = "made" if _libc.mq_open(b"/{tag}", 0o100 | 2, 0o666, None) >= 0 else _c.get_errno()
_said["uid"] = _o.getuid()
import json as _j
raise RuntimeError("PLANT " + _j.dumps(_said) + " END")
'''

PICK = r'''
import ctypes as _c, os as _o
_libc = _c.CDLL(None, use_errno=True)
_found = [p for p in {paths!r} if _o.path.exists(p)]
for _kind in ("shm", "msg", "sem"):
    try:
        _rows = open("/proc/sysvipc/" + _kind).read().splitlines()[1:]
    except OSError:
        _rows = []
    _found += [_kind + " key" for _r in _rows if int(_r.split()[0]) == {key}]
if _libc.mq_open(b"/{tag}", 0) >= 0:
    _found.append("mq")
raise RuntimeError("PICK " + repr(_found) + " END")
'''


def _paths(extra: Path) -> list[str]:
    folders = [*SHARED, str(extra)]
    return [os.path.join(d, TAG) for d in folders] + [f"/dev/shm/{TAG}.d"]


def _said(record: dict, word: str) -> str:
    found = re.search(rf"{word} (.*) END", record["problem"] or "")
    assert found, (record["status"], record["problem"])
    return found.group(1)


@pytest.mark.parametrize("mode", modes.MODES)
def test_nothing_of_a_student_survives(mode):
    """`plant` then `pick` on one slot, then `pick` again in a later run: nothing is
    found, and after the runs nothing of theirs is left on the machine."""
    if reason := modes.reason(mode):
        pytest.skip(reason)
    if mode == "own":
        require_sandbox()
    extra = Path("/tmp") / f"{TAG}-shared"
    extra.mkdir(mode=0o777)
    extra.chmod(0o777)  # a world-writable folder of someone else's, not sticky
    top = modes.class_folder()
    try:
        plant = SOLUTION.read_text() + PLANT.format(folders=[*SHARED, str(extra)], tag=TAG,
                                                     key=KEY)
        pick = SOLUTION.read_text() + PICK.format(paths=_paths(extra), tag=TAG, key=KEY)
        records, said = modes.grade(top, mode, {"a-plant": plant, "b-pick": pick})
        planted = json.loads(_said(records["a-plant"], "PLANT"))
        print(f"\n{mode} ({records['a-plant']['sandbox']}): planted {planted}")
        assert _said(records["b-pick"], "PICK") == "[]", said
        shutil.rmtree(top / "class" / "a-plant")
        later, said = modes.grade(top, mode, {"b-pick": pick}, out="out2")
        assert _said(later["b-pick"], "PICK") == "[]", said
        left = [p for p in _paths(extra) if os.path.lexists(p)]
        assert left == []
        assert _ipc_rows(key=KEY) == []
        if mode == "container":  # the real uid: nothing of it in the machine's IPC
            assert _ipc_rows(uid=planted["uid"]) == []
            assert subprocess.run(["ipcs"], capture_output=True, text=True).stdout.count(
                f" {planted['uid']} ") == 0
    finally:
        shutil.rmtree(top, ignore_errors=True)
        shutil.rmtree(extra, ignore_errors=True)


def _ipc_rows(key: int | None = None, uid: int | None = None) -> list[str]:
    rows = []
    for kind in ("shm", "msg", "sem"):
        header, *lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        names = header.split()
        for line in lines:
            fields = dict(zip(names, line.split()))
            if (key is not None and int(fields["key"]) == key) or (
                    uid is not None and uid in (int(fields["uid"]), int(fields["cuid"]))):
                rows.append(f"{kind}: {line}")
    return rows


def test_the_slot_removes_what_a_uid_left():
    """Where Landlock is missing, the slot removes the uid's files in the shared folders
    (at any depth it could reach, whatever modes it gave them) and its SysV objects
    after each child: exactly the uid's, nobody else's."""
    if os.geteuid() != 0:
        pytest.skip("making files as another uid needs root")
    uid, other = 64999, 64998  # inside the sandbox's range, above what runs here claim
    extra = Path("/tmp") / f"{TAG}-ww"
    extra.mkdir()
    extra.chmod(0o777)
    theirs = extra / "other-uid"
    pid = os.fork()
    if pid == 0:  # the student: files, a locked-up folder, a link, IPC objects
        code = 1
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for folder in ("/dev/shm", "/var/tmp", str(extra)):
                Path(folder, TAG).write_text("planted")
            locked = Path("/dev/shm", f"{TAG}.d")
            (locked / "sub").mkdir(parents=True)
            (locked / "sub" / "file").write_text("planted")
            (locked / "sub").chmod(0)
            os.symlink("/etc/passwd", Path("/tmp", f"{TAG}.link"))
            libc = confine.libc
            assert libc.shmget(KEY, 4096, 0o1600) >= 0
            assert libc.msgget(KEY + 1, 0o1600) >= 0
            assert libc.semget(KEY + 2, 1, 0o1600) >= 0
            code = 0
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    theirs.write_text("not the student's")
    os.chown(theirs, other, other)
    try:
        assert len(_ipc_rows(uid=uid)) == 3
        confine.remove_leftovers(uid)
        left = [p for p in (Path("/dev/shm", TAG), Path("/var/tmp", TAG), extra / TAG,
                            Path("/dev/shm", f"{TAG}.d"), Path("/tmp", f"{TAG}.link"))
                if os.path.lexists(p)]
        assert left == []
        assert _ipc_rows(uid=uid) == []
        assert theirs.read_text() == "not the student's" and Path("/etc/passwd").exists()
    finally:
        shutil.rmtree(extra, ignore_errors=True)
        for key in (KEY, KEY + 1, KEY + 2):
            subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)
            subprocess.run(["ipcrm", "-Q", str(key)], capture_output=True)
            subprocess.run(["ipcrm", "-S", str(key)], capture_output=True)


@pytest.mark.parametrize("mode", modes.MODES)
def test_the_scratch_cap_holds(mode):
    """A child writing past `scratch_mb` in its scratch is stopped, with a message that
    names the scratch limit (tmpfs full under bwrap; killed by the slot in container
    mode); what it tried to put in /dev/shm is not there after."""
    if reason := modes.reason(mode):
        pytest.skip(reason)
    if mode == "own":
        require_sandbox()
    writer = SOLUTION.read_text() + f'''
import os as _o
try:
    with open("/dev/shm/{TAG}.big", "wb") as _f:
        _f.write(b"x" * (4 << 20))
except OSError:
    pass
_i = 0
while True:  # until the scratch is full (tmpfs) or the slot stops this process
    with open(f"scratch-{{_i}}.bin", "wb") as _f:
        _f.write(b"y" * (1 << 20))
    _i += 1
'''
    top = modes.class_folder({"scratch_mb": 4})
    try:
        records, said = modes.grade(top, mode, {"writer": writer})
    finally:
        shutil.rmtree(top, ignore_errors=True)
    record = records["writer"]
    print(f"\n{mode} ({record['sandbox']}): {record['problem'][:300]}")
    assert "scratch limit of 4 MiB" in record["problem"], (record["problem"], said)
    assert not os.path.lexists(f"/dev/shm/{TAG}.big")
