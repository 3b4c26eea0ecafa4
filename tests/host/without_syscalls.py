"""Runs a command with some system calls refused, as an older kernel (ENOSYS)
or a seccomp filter that does not know them would refuse them:

    python3 without_syscalls.py epoll_pwait2 -- latgovd ...

Installs a seccomp filter that fails the named calls with ENOSYS, then execs
the command, whose threads inherit it. As root (CAP_SYS_ADMIN installs a
filter without no_new_privs, so the command keeps its capabilities). An
architecture or a call it does not know is an error, never a no-op."""

import ctypes
import errno
import os
import platform
import struct
import sys

# Calls added since the unified numbering (Linux 5.1) have one number on
# every architecture.
SYSCALLS = {"epoll_pwait2": 441}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
OFFSET_NR, OFFSET_ARCH = 0, 4  # struct seccomp_data


def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def program(arch, numbers):
    """Other architectures: allowed (the process is native); each number:
    ENOSYS; the rest: allowed."""
    n = len(numbers)
    code = [insn(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
            insn(BPF_JEQ_K, 0, n + 1, arch),  # to the ALLOW return
            insn(BPF_LD_W_ABS, 0, 0, OFFSET_NR)]
    for i, nr in enumerate(numbers):
        code.append(insn(BPF_JEQ_K, n - i, 0, nr))  # to the ENOSYS return
    code.append(insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    code.append(insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS))
    return b"".join(code)


def main(argv):
    if "--" not in argv or argv.index("--") == 0 or argv.index("--") == len(argv) - 1:
        sys.exit("usage: without_syscalls.py CALL... -- COMMAND [ARG...]")
    split = argv.index("--")
    names, command = argv[:split], argv[split + 1:]
    unknown = [name for name in names if name not in SYSCALLS]
    if unknown:
        sys.exit(f"without_syscalls.py: unknown system call(s) {unknown}; known: "
                 f"{sorted(SYSCALLS)}")
    arch = AUDIT_ARCH.get(platform.machine())
    if arch is None:
        sys.exit(f"without_syscalls.py: no seccomp architecture for {platform.machine()}")
    code = program(arch, [SYSCALLS[name] for name in names])
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(code) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        sys.exit(f"without_syscalls.py: prctl(PR_SET_SECCOMP): {os.strerror(err)}")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
