"""Run a command where no user namespace can be made, as Docker's default seccomp
profile has it for a process without CAP_SYS_ADMIN: `unshare` and `clone` with
CLONE_NEWUSER fail with EPERM, and `clone3` with ENOSYS (so libc falls back to
clone). Container mode then has no namespace at all: the grader runs its workers
without bwrap.

    python no_userns.py CMD [ARG...]
"""
from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

CLONE_NEWUSER = 0x10000000
# x86_64 and aarch64: (audit arch, unshare, clone, clone3)
ARCHES = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low word)


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter: (code, jt, jf, k) instructions."""
    arch, unshare, clone, clone3 = ARCHES[machine]
    return [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, RET_ALLOW),
        (LD_W_ABS, 0, 0, NR),
        (JEQ_K, 0, 1, clone3),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),
        (JEQ_K, 1, 0, unshare),
        (JEQ_K, 0, 3, clone),
        (LD_W_ABS, 0, 0, ARG0),
        (JSET_K, 0, 1, CLONE_NEWUSER),
        (RET_K, 0, 0, RET_ERRNO | errno.EPERM),
        (RET_K, 0, 0, RET_ALLOW),
    ]


def main() -> None:
    insns = program(os.uname().machine)
    code = b"".join(struct.pack("HBBI", *insn) for insn in insns)
    buf = ctypes.create_string_buffer(code)
    prog = struct.pack("HxxxxxxP", len(insns), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        sys.exit("no_userns: prctl(NO_NEW_PRIVS) failed")
    if libc.prctl(22, 2, ctypes.c_char_p(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        sys.exit(f"no_userns: the seccomp filter failed ({os.strerror(ctypes.get_errno())})")
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
