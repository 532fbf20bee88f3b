"""A seccomp filter, written as classic BPF by hand (no libseccomp needed): the system calls a
kernel evaluation never needs fail with EPERM, so a candidate cannot start a program, inspect
or write another process, open a socket of any family, mount, make namespaces or load kernel
code. Other architectures than x86_64 and arm64 get no filter (the caller says so). No jax here.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0 = 0, 4, 16
_X32_BIT = 0x40000000

# clone flags that make namespaces: refused as unshare and setns are.
_CLONE_NAMESPACES = 0x7E020000 | 0x80  # NEWNS, NEWCGROUP..NEWNET, NEWTIME

_X86_64 = {
    "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "process_madvise": 440, "pidfd_getfd": 438, "kcmp": 312,
    "socket": 41, "bind": 49, "listen": 50, "connect": 42, "accept": 43, "accept4": 288,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272,
    "setns": 308, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "swapon": 167, "swapoff": 168, "reboot": 169,
    "clone": 56, "clone3": 435,
}  # fmt: skip
_ARM64 = {
    "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "process_madvise": 440, "pidfd_getfd": 438, "kcmp": 272,
    "socket": 198, "bind": 200, "listen": 201, "connect": 203, "accept": 202, "accept4": 242,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "name_to_handle_at": 264, "open_by_handle_at": 265,
    "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
    "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
    "delete_module": 106, "swapon": 224, "swapoff": 225, "reboot": 142, "clone": 220,
    "clone3": 435,
}  # fmt: skip
# ENOSYS for clone3, whose flags sit in memory a filter cannot read: the C library then falls
# back to clone, whose flags it can. Every other call named above is refused.
_DENIED = [name for name in _X86_64 if name not in ("clone", "clone3")]
_MACHINES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _ARM64)}


class SeccompError(OSError):
    """No filter for this machine, or the kernel refused it."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter for `machine` (default: this one) as BPF instructions."""
    machine = machine or platform.machine()
    if machine not in _MACHINES:
        raise SeccompError(f"no seccomp filter for {machine}")
    arch, numbers = _MACHINES[machine]
    deny = _RET_ERRNO | errno.EPERM
    code = [
        _insn(_LD_W_ABS, _OFFSET_ARCH),
        _insn(_JEQ_K, arch, jt=1),
        _insn(_RET_K, deny),  # another ABI (a 32-bit one) could name other calls
        _insn(_LD_W_ABS, _OFFSET_NR),
    ]
    if machine == "x86_64":
        code += [_insn(_JGE_K, _X32_BIT, jf=1), _insn(_RET_K, deny)]
    for name in _DENIED:
        code += [_insn(_JEQ_K, numbers[name], jf=1), _insn(_RET_K, deny)]
    code += [_insn(_JEQ_K, numbers["clone3"], jf=1), _insn(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    code += [
        _insn(_JEQ_K, numbers["clone"], jf=3),
        _insn(_LD_W_ABS, _OFFSET_ARG0),  # the low 32 bits of clone's flags
        _insn(_JSET_K, _CLONE_NAMESPACES, jf=1),
        _insn(_RET_K, deny),
        _insn(_RET_K, _RET_ALLOW),
    ]
    return b"".join(code)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def set_no_new_privs() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def install() -> None:
    """Install the filter on this (single-threaded) process; threads and children it starts
    inherit it. no_new_privs must be set first."""
    code = program()
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
