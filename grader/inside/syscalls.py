"""The one syscall allowlist of a submission's child, the same in every sandbox mode
(root, userns, container), as data: what a child may call, what it may call only with
some arguments, and, for the record and the tests, what it is refused and why. Runs
inside the sandbox, loaded by path (zygote.py says why); only the standard library.

Everything not allowed is refused with EPERM, never a kill: the student sees an
ordinary OSError. clone3 answers ENOSYS (its flags live in memory a filter cannot
read; libc then falls back to clone, whose flags it can), and so does any call newer
than this table and any other ABI (i386, x32). The list was drawn from what the
solution, the practice tests and a class use under strace, widened to what ordinary
Python and torch code calls (files, memory, threads, signals, time, polling, Unix
sockets) and narrowed by what no honest submission needs: no network (io_uring, any
socket but a Unix one), no new namespace, no mount, no kernel keyring, no SysV or
POSIX message IPC (both outlive their process), no memfd (its pages are not address
space: without a memory cgroup, RLIMIT_AS would not cap them), no socket buffer sizes
(SO_SNDBUF and kin: 256 Unix sockets at the machine's maximum hold gigabytes outside
the address space), no inotify, fanotify, file lock, lease or directory notice (a
per-user quota of the TA's, and a channel between two students through the files
both sandboxes share), no tracing or reading another process, no kernel module, BPF or
perf. Where no memory cgroup caps a child's processes together (`program`'s `alone`),
it may start threads but no second process: RLIMIT_AS caps one process only.
"""
from __future__ import annotations

_: None = None  # no such call on this machine

# The audit architecture seccomp reports for each machine, and its column below
MACHINES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}

# name: (x86_64 number, aarch64 number), allowed whatever the arguments
ALLOWED: dict[str, tuple[int | None, int | None]] = {
    "read": (0, 63), "write": (1, 64), "readv": (19, 65), "writev": (20, 66),
    "pread64": (17, 67), "pwrite64": (18, 68), "preadv": (295, 69), "pwritev": (296, 70),
    "preadv2": (327, 286), "pwritev2": (328, 287), "open": (2, _), "openat": (257, 56),
    "openat2": (437, 437), "close": (3, 57), "close_range": (436, 436), "creat": (85, _),
    "lseek": (8, 62), "stat": (4, _), "lstat": (6, _), "fstat": (5, 80),
    "newfstatat": (262, 79), "statx": (332, 291), "statfs": (137, 43),
    "fstatfs": (138, 44), "access": (21, _), "faccessat": (269, 48),
    "faccessat2": (439, 439), "readlink": (89, _), "readlinkat": (267, 78),
    "getdents": (78, _), "getdents64": (217, 61), "getcwd": (79, 17), "chdir": (80, 49),
    "fchdir": (81, 50), "mkdir": (83, _), "mkdirat": (258, 34), "rmdir": (84, _),
    "unlink": (87, _), "unlinkat": (263, 35), "rename": (82, _), "renameat": (264, 38),
    "renameat2": (316, 276), "link": (86, _), "linkat": (265, 37), "symlink": (88, _),
    "symlinkat": (266, 36), "chmod": (90, _), "fchmod": (91, 52), "fchmodat": (268, 53),
    "fchmodat2": (452, 452), "chown": (92, _), "fchown": (93, 55), "lchown": (94, _),
    "fchownat": (260, 54), "truncate": (76, 45), "ftruncate": (77, 46),
    "fallocate": (285, 47), "fsync": (74, 82), "fdatasync": (75, 83), "utime": (132, _),
    "utimes": (235, _), "utimensat": (280, 88), "futimesat": (261, _), "umask": (95, 166),
    "dup": (32, 23), "dup2": (33, _), "dup3": (292, 24), "pipe": (22, _), "pipe2": (293, 59), "sendfile": (40, 71),
    "copy_file_range": (326, 285), "fadvise64": (221, 223), "readahead": (187, 213),
    "getxattr": (191, 8), "lgetxattr": (192, 9), "fgetxattr": (193, 10),
    "listxattr": (194, 11), "llistxattr": (195, 12), "flistxattr": (196, 13),
    "mknod": (133, _), "mknodat": (259, 33), "mmap": (9, 222),
    "munmap": (11, 215), "mremap": (25, 216), "mprotect": (10, 226), "madvise": (28, 233),
    "msync": (26, 227), "mincore": (27, 232), "brk": (12, 214),
    "get_mempolicy": (239, 236), "set_mempolicy": (238, 237), "mbind": (237, 235),
    "membarrier": (324, 283), "pkey_alloc": (330, 289), "pkey_free": (331, 290),
    "pkey_mprotect": (329, 288), "cachestat": (451, 451), "execve": (59, 221), "execveat": (322, 281), "exit": (60, 93),
    "exit_group": (231, 94), "wait4": (61, 260), "waitid": (247, 95), "kill": (62, 129),
    "tkill": (200, 130), "tgkill": (234, 131), "rt_sigaction": (13, 134),
    "rt_sigprocmask": (14, 135), "rt_sigreturn": (15, 139), "rt_sigpending": (127, 136),
    "rt_sigtimedwait": (128, 137), "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240), "rt_sigsuspend": (130, 133),
    "sigaltstack": (131, 132), "signalfd": (282, _), "signalfd4": (289, 74),
    "pause": (34, _), "getpid": (39, 172), "getppid": (110, 173), "gettid": (186, 178),
    "getuid": (102, 174), "geteuid": (107, 175), "getgid": (104, 176),
    "getegid": (108, 177), "getresuid": (118, 148), "getresgid": (120, 150),
    "getgroups": (115, 158), "getpgid": (121, 155), "getpgrp": (111, _),
    "setpgid": (109, 154), "getsid": (124, 156), "setsid": (112, 157), "prctl": (157, 167),
    "arch_prctl": (158, _), "set_tid_address": (218, 96), "set_robust_list": (273, 99),
    "rseq": (334, 293), "futex": (202, 98), "futex_waitv": (449, 449),
    "futex_wake": (454, 454), "futex_wait": (455, 455), "futex_requeue": (456, 456),
    "sched_yield": (24, 124), "sched_getaffinity": (204, 123),
    "sched_setaffinity": (203, 122), "sched_getparam": (143, 121),
    "sched_getscheduler": (145, 120), "sched_get_priority_max": (146, 125),
    "sched_get_priority_min": (147, 126), "sched_rr_get_interval": (148, 127),
    "sched_getattr": (315, 275), "getpriority": (140, 141), "setpriority": (141, 140),
    "getrlimit": (97, 163), "setrlimit": (160, 164), "prlimit64": (302, 261),
    "getrusage": (98, 165), "times": (100, 153), "sysinfo": (99, 179), "uname": (63, 160),
    "capget": (125, 90), "getcpu": (309, 168), "getrandom": (318, 278),
    "restart_syscall": (219, 128), "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424), "clock_gettime": (228, 113),
    "clock_getres": (229, 114), "clock_nanosleep": (230, 115), "nanosleep": (35, 101),
    "gettimeofday": (96, 169), "time": (201, _), "alarm": (37, _), "getitimer": (36, 102),
    "setitimer": (38, 103), "timer_create": (222, 107), "timer_settime": (223, 110),
    "timer_gettime": (224, 108), "timer_getoverrun": (225, 109),
    "timer_delete": (226, 111), "timerfd_create": (283, 85), "timerfd_settime": (286, 86),
    "timerfd_gettime": (287, 87), "select": (23, _), "pselect6": (270, 72), "poll": (7, _),
    "ppoll": (271, 73), "epoll_create": (213, _), "epoll_create1": (291, 20),
    "epoll_ctl": (233, 21), "epoll_wait": (232, _), "epoll_pwait": (281, 22),
    "epoll_pwait2": (441, 441), "eventfd": (284, _), "eventfd2": (290, 19),
    "connect": (42, 203), "accept": (43, 202), "accept4": (288, 242), "bind": (49, 200),
    "listen": (50, 201), "sendto": (44, 206), "recvfrom": (45, 207), "sendmsg": (46, 211),
    "recvmsg": (47, 212), "sendmmsg": (307, 269), "recvmmsg": (299, 243),
    "shutdown": (48, 210), "getsockname": (51, 204), "getpeername": (52, 205),
    "getsockopt": (55, 209),
}

# Allowed with some arguments only (the rule's name: `program` checks it)
AF_UNIX = 1
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: a namespace of its own
# would give the student capabilities there, and the kernel surface that comes with them
CLONE_NAMESPACES = 0x7E020000
CLONE_THREAD = 0x00010000  # a thread shares its address space: one RLIMIT_AS caps both
SOL_SOCKET = 1
# SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE: a socket's buffers stay at the
# machine's default (net.core.wmem_default), whatever the maximum
SOCKET_BUFFERS = (7, 8, 32, 33)
# F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE,
# F_GETLEASE, F_NOTIFY: a lock, lease or directory notice on a file two sandboxes
# share (the read-only venv and grader) would carry a signal from one student to another
FCNTL_SHARED = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
TIOCSTI, TIOCLINUX = 0x5412, 0x541C  # typing into a terminal (the child has none anyway)
RULES: dict[str, tuple[int | None, int | None, str]] = {
    "socket": (41, 198, "unix"), "socketpair": (53, 199, "unix"),
    "clone": (56, 220, "no namespace; alone, threads only"),
    "ioctl": (16, 29, "no terminal input"), "clone3": (435, 435, "ENOSYS"),
    "fork": (57, _, "alone: refused"), "vfork": (58, _, "alone: refused"),
    "setsockopt": (54, 208, "no buffer sizes"), "fcntl": (72, 25, "no lock, lease or notice"),
}

# Refused (EPERM), named for the record and the tests: every other call not above is
# refused alike. name: (x86_64, aarch64, why)
DENIED: dict[str, tuple[int | None, int | None, str]] = {
    "io_uring_setup": (425, 425, "io_uring: its IORING_OP_SOCKET opens sockets unfiltered"),
    "io_uring_enter": (426, 426, "io_uring"),
    "io_uring_register": (427, 427, "io_uring"),
    "keyctl": (250, 219, "kernel keys outlive their process"),
    "add_key": (248, 217, "kernel keys"), "request_key": (249, 218, "kernel keys"),
    "bpf": (321, 280, "BPF programs"), "perf_event_open": (298, 241, "perf"),
    "ptrace": (101, 117, "tracing another process"),
    "process_vm_readv": (310, 270, "reading another process"),
    "process_vm_writev": (311, 271, "writing another process"),
    "pidfd_getfd": (438, 438, "taking another process's descriptor"),
    "kcmp": (312, 272, "comparing other processes' kernel objects"),
    "process_madvise": (440, 440, "another process's memory"),
    "userfaultfd": (323, 282, "stalling the kernel on a page fault"),
    "mount": (165, 40, "mounts"), "umount2": (166, 39, "mounts"),
    "pivot_root": (155, 41, "mounts"), "move_mount": (429, 429, "mounts"),
    "open_tree": (428, 428, "mounts"), "fsopen": (430, 430, "mounts"),
    "fsconfig": (431, 431, "mounts"), "fsmount": (432, 432, "mounts"),
    "fspick": (433, 433, "mounts"), "mount_setattr": (442, 442, "mounts"),
    "chroot": (161, 51, "mounts"),
    "unshare": (272, 97, "a new namespace"), "setns": (308, 268, "another namespace"),
    "init_module": (175, 105, "kernel modules"), "finit_module": (313, 273, "kernel modules"),
    "delete_module": (176, 106, "kernel modules"), "kexec_load": (246, 104, "kexec"),
    "kexec_file_load": (320, 294, "kexec"),
    "shmget": (29, 194, "SysV IPC outlives its process"), "shmat": (30, 196, "SysV IPC"),
    "shmdt": (67, 197, "SysV IPC"), "shmctl": (31, 195, "SysV IPC"),
    "semget": (64, 190, "SysV IPC"), "semop": (65, 193, "SysV IPC"),
    "semctl": (66, 191, "SysV IPC"), "semtimedop": (220, 192, "SysV IPC"),
    "msgget": (68, 186, "SysV IPC"), "msgsnd": (69, 189, "SysV IPC"),
    "msgrcv": (70, 188, "SysV IPC"), "msgctl": (71, 187, "SysV IPC"),
    "mq_open": (240, 180, "POSIX message queues outlive their process"),
    "mq_unlink": (241, 181, "POSIX message queues"),
    "mq_timedsend": (242, 182, "POSIX message queues"),
    "mq_timedreceive": (243, 183, "POSIX message queues"),
    "mq_notify": (244, 184, "POSIX message queues"),
    "mq_getsetattr": (245, 185, "POSIX message queues"),
    "name_to_handle_at": (303, 264, "file handles bypass paths"),
    "open_by_handle_at": (304, 265, "file handles bypass paths"),
    "fanotify_init": (300, 262, "watching the whole filesystem"),
    "fanotify_mark": (301, 263, "watching the whole filesystem"),
    "inotify_init": (253, _, "inotify instances count against the user's quota, and a "
                     "watch on a file two sandboxes share is a channel between students"),
    "inotify_init1": (294, 26, "inotify"), "inotify_add_watch": (254, 27, "inotify"),
    "inotify_rm_watch": (255, 28, "inotify"),
    "flock": (73, 32, "a lock on a file two sandboxes share is a channel between students"),
    "setuid": (105, 146, "changing identity"), "setgid": (106, 144, "changing identity"),
    "setreuid": (113, 145, "changing identity"), "setregid": (114, 143, "changing identity"),
    "setresuid": (117, 147, "changing identity"), "setresgid": (119, 149, "changing identity"),
    "setgroups": (116, 159, "changing identity"), "setfsuid": (122, 151, "changing identity"),
    "setfsgid": (123, 152, "changing identity"), "capset": (126, 91, "capabilities"),
    "personality": (135, 92, "another execution domain"),
    "seccomp": (317, 277, "filters of its own"),
    "mlock": (149, 228, "locked memory"), "mlock2": (325, 284, "locked memory"),
    "mlockall": (151, 230, "locked memory"), "memfd_secret": (447, 447, "locked memory"),
    "memfd_create": (319, 279, "memory held outside the address space RLIMIT_AS caps"),
    "vmsplice": (278, 75, "page splicing"), "splice": (275, 76, "page splicing"),
    "tee": (276, 77, "page splicing"),
    "io_setup": (206, 0, "kernel AIO"), "io_submit": (209, 2, "kernel AIO"),
    "swapon": (167, 224, "the machine's"), "swapoff": (168, 225, "the machine's"),
    "reboot": (169, 142, "the machine's"), "syslog": (103, 116, "the kernel's log"),
    "acct": (163, 89, "the machine's"), "quotactl": (179, 60, "the machine's"),
    "settimeofday": (164, 170, "the machine's clock"),
    "clock_settime": (227, 112, "the machine's clock"),
    "adjtimex": (159, 171, "the machine's clock"),
    "sethostname": (170, 161, "the machine's name"),
    "setdomainname": (171, 162, "the machine's name"),
    "modify_ldt": (154, _, "x86 segments"), "iopl": (172, _, "I/O ports"),
    "ioperm": (173, _, "I/O ports"),
    "landlock_create_ruleset": (444, 444, "confined already"),
    "file_setattr": (469, 469, "the newest call this table names"),
}


def first_unknown(column: int) -> int:
    """The lowest number above every call named here: anything from it on is newer
    than this table, answered ENOSYS (libc then falls back, as for clone3)."""
    rows = [*ALLOWED.values(), *RULES.values(), *DENIED.values()]
    return max(n for r in rows if isinstance(n := r[column], int)) + 1


# Classic BPF, as seccomp runs it over struct seccomp_data {nr, arch, ip, args[6]}
LD_ABS, JA, JEQ, JGE, JSET, RET = 0x20, 0x05, 0x15, 0x35, 0x45, 0x06
NR, ARCH, ARG0, ARG1, ARG2 = 0, 4, 16, 24, 32  # offsets (an argument's low word: little-endian)
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38
X32_BIT = 0x40000000
CHUNK = 64  # checks between two "allow" returns: a conditional jump reaches 255 on


def program(machine: str, alone: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` (a key of MACHINES), as BPF instructions. Calls
    allowed whatever their arguments are decided without reading an argument, so the
    kernel caches them as always allowed and they cost nothing per call. `alone`:
    no memory cgroup caps the child's processes together, so it may start threads
    (clone with CLONE_THREAD) but no process (fork, vfork, any other clone)."""
    column, audit = MACHINES[machine]
    allowed = sorted({n for row in ALLOWED.values() if (n := row[column]) is not None})
    rule = {name: row[column] for name, row in RULES.items()}
    lines: list = [
        (LD_ABS, None, None, ARCH),
        (JEQ, "abi", None, audit),
        (RET, None, None, RET_ERRNO | ENOSYS),      # any other ABI (i386)
        "abi", (LD_ABS, None, None, NR),
        (JGE, "x32", "native", X32_BIT),
        "x32", (RET, None, None, RET_ERRNO | ENOSYS),
        "native",
    ]
    for at in range(0, len(allowed), CHUNK):
        here = f"allow{at}"
        lines += [(JEQ, here, None, nr) for nr in allowed[at:at + CHUNK]]
        lines += [(JA, None, None, f"past{at}"), here, (RET, None, None, RET_ALLOW),
                  f"past{at}"]
    lines += [
        (JEQ, "unix", None, rule["socket"]),
        (JEQ, "unix", None, rule["socketpair"]),
        (JEQ, "clone", None, rule["clone"]),
        (JEQ, "ioctl", None, rule["ioctl"]),
        (JEQ, "sockopt", None, rule["setsockopt"]),
        (JEQ, "fcntl", None, rule["fcntl"]),
        *((JEQ, "process", None, rule[name]) for name in ("fork", "vfork")
          if rule[name] is not None),
        (JEQ, "enosys", None, rule["clone3"]),
        (JGE, "enosys", "eperm", first_unknown(column)),
        "unix", (LD_ABS, None, None, ARG0),           # the address family
        (JEQ, "allow", "eperm", AF_UNIX),
        "clone", (LD_ABS, None, None, ARG0),          # the flags
        (JSET, "eperm", "thread" if alone else "allow", CLONE_NAMESPACES),
        *(["thread", (JSET, "allow", "eperm", CLONE_THREAD)] if alone else []),
        "process", (RET, None, None, RET_ERRNO | EPERM if alone else RET_ALLOW),
        "sockopt", (LD_ABS, None, None, ARG1),        # the level
        (JEQ, None, "allow", SOL_SOCKET),
        (LD_ABS, None, None, ARG2),                   # the option
        *((JEQ, "eperm", None, name) for name in SOCKET_BUFFERS),
        (JA, None, None, "allow"),
        "fcntl", (LD_ABS, None, None, ARG1),          # the command
        *((JEQ, "eperm", None, cmd) for cmd in FCNTL_SHARED),
        (JA, None, None, "allow"),
        "ioctl", (LD_ABS, None, None, ARG1),          # the request
        (JEQ, "eperm", None, TIOCSTI),
        (JEQ, "eperm", "allow", TIOCLINUX),
        "allow", (RET, None, None, RET_ALLOW),
        "eperm", (RET, None, None, RET_ERRNO | EPERM),
        "enosys", (RET, None, None, RET_ERRNO | ENOSYS),
    ]
    return _assemble(lines)


def _assemble(lines: list) -> list[tuple[int, int, int, int]]:
    """BPF instructions from (code, jump-if-true, jump-if-false, k) with jumps named
    by the labels (strings) placed before their targets; None falls through. JA's
    target is its k."""
    where, at = {}, 0
    for line in lines:
        if isinstance(line, str):
            where[line] = at
        else:
            at += 1
    program: list[tuple[int, int, int, int]] = []
    for line in lines:
        if isinstance(line, str):
            continue
        code, jt, jf, k = line
        here = len(program) + 1
        jumps = (where[jt] - here if jt else 0, where[jf] - here if jf else 0)
        if code == JA:
            k, jumps = where[k] - here, (0, 0)
        if not all(0 <= j <= 255 for j in jumps):
            raise ValueError(f"a jump out of reach at instruction {here - 1}")
        program.append((code, *jumps, k))
    return program
