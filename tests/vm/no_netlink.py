#!/usr/bin/env python3
"""Runs a command with netlink sockets refused, as a unit with
RestrictAddressFamilies= that leaves out AF_NETLINK runs it: socket(AF_NETLINK,
...) fails with EAFNOSUPPORT (a seccomp filter, inherited by the command's
children). A private network namespace does not do it: the kernel sends its
uevents to every namespace the initial user namespace owns.

Usage: no_netlink.py COMMAND [ARGS...]
"""
import ctypes
import errno
import os
import platform
import struct
import sys

# seccomp_data: nr (int), arch (u32), instruction_pointer (u64), args[6] (u64)
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16
# the audit arch and the number of socket(2) per machine
ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
AF_NETLINK = 16
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_NO_NEW_PRIVS = 22, 2, 38


def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: no_netlink.py COMMAND [ARGS...]")
    machine = platform.machine()
    if machine not in ARCHES:
        sys.exit(f"no_netlink.py: no socket(2) number known for {machine}")
    arch, socket_nr = ARCHES[machine]
    program = b"".join([
        insn(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        insn(BPF_JEQ_K, 0, 5, arch),            # another ABI: allowed
        insn(BPF_LD_W_ABS, 0, 0, OFFSET_NR),
        insn(BPF_JEQ_K, 0, 3, socket_nr),       # not socket(2): allowed
        insn(BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),  # the family (low half)
        insn(BPF_JEQ_K, 0, 1, AF_NETLINK),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ])
    buffer = ctypes.create_string_buffer(program, len(program))
    # struct sock_fprog: unsigned short len, then the filter's address
    fprog = struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                      ctypes.c_ulong]
    if prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        sys.exit(f"no_netlink.py: PR_SET_NO_NEW_PRIVS: {os.strerror(ctypes.get_errno())}")
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog_buffer), 0, 0) != 0:
        sys.exit(f"no_netlink.py: PR_SET_SECCOMP: {os.strerror(ctypes.get_errno())}")
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
