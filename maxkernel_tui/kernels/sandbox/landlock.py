"""Landlock (Linux 5.13+), through its three system calls: after `restrict`, this process and
every process it starts can open files only beneath the directories allowed, make no TCP
connection or bind (ABI 4+), signal no process and reach no abstract Unix socket outside its own
domain (ABI 6+). No root needed; it cannot be undone. No jax here.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1

_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ = _EXECUTE | _READ_FILE | _READ_DIR  # EXECUTE: mapping libraries executable


class LandlockError(OSError):
    """Landlock is missing here or refused a rule."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi_version() -> int:
    """Landlock's ABI version here; 0 where the kernel has none or it is disabled."""
    version = _libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def _handled_fs(abi: int) -> int:
    handled = (1 << 13) - 1  # EXECUTE .. MAKE_SYM: ABI 1
    for bit, since in ((_REFER, 2), (_TRUNCATE, 3), (_IOCTL_DEV, 5)):
        if abi >= since:
            handled |= bit
    return handled


def restrict(readable: Iterable[str], writable: Iterable[str]) -> list[str]:
    """Confine this process: read (and map) beneath `readable`, everything beneath `writable`.
    Returns the Landlock protections in force (files; tcp from ABI 4; scopes from ABI 6).
    Paths that do not exist are skipped. Needs no_new_privs set first."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available in this kernel")
    handled = _handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = ctypes.sizeof(_RulesetAttr)
    protections = ["files"]
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        protections.append("tcp")
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
        protections.append("scopes")
    else:
        size = ctypes.sizeof(ctypes.c_uint64) * 2
    ruleset = _libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in readable:
            _allow(int(ruleset), path, _READ)
        for path in writable:
            _allow(int(ruleset), path, handled)
        if _libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), 0) < 0:
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(int(ruleset))
    return protections


def _allow(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            access &= _FILE_ONLY
        rule = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        if _libc.syscall(
            _ADD_RULE, ctypes.c_int(ruleset), _RULE_PATH_BENEATH, ctypes.byref(rule), 0
        ):
            raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
