"""Linux namespaces for a worker, entered without root: a user namespace (which grants the
rights to make the others), a PID namespace (the worker sees only its own processes, and when it
ends the kernel ends every process it started, detached or not), a network namespace with no
interface up (no loopback of the host, no metadata server), a mount namespace with a /proc of
its own, and IPC and UTS namespaces. No jax here.

Python 3.11 has no os.unshare: the calls go through ctypes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
from collections.abc import Callable

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_PR_SET_PDEATHSIG = 1
_PID_MAX_MIN = 301  # the kernel refuses less

_libc = ctypes.CDLL(None, use_errno=True)


class NamespaceError(OSError):
    """A namespace could not be made here (disabled user namespaces, an old kernel)."""


def unshare(flags: int) -> None:
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        raise NamespaceError(ctypes.get_errno(), "unshare failed")


def enter_user_namespace() -> None:
    """A user namespace where this process keeps its uid and gid (and holds, inside it, the
    capabilities the other namespaces need), plus new mount, network, IPC and UTS namespaces,
    and a PID namespace that the next forked child starts."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def fork_namespace_init(parent_alive: Callable[[], bool], poll_s: float = 0.25) -> None:
    """Fork into the new PID namespace and return in the worker, its second process; its first
    (init: the kernel shields init from its own namespace's signals, so a worker that signals
    itself could not die as init) only reaps and ends with the worker. This process stays
    behind as the keeper: it closes its copies of the worker's streams (so the caller sees them
    end when the worker does), waits, kills the process group once `parent_alive()` says the
    caller is gone (it cannot start a thread: a process whose children get a new PID namespace
    makes none), and ends the way the worker ended. The caller's kill of the process group
    reaches all three; each dies with its parent (PDEATHSIG)."""
    alive_read, alive_write = os.pipe()  # the keeper holds the write end while it lives
    status_read, status_write = os.pipe()  # init tells the keeper how the worker ended
    pid = os.fork()
    if pid == 0:
        os.close(alive_write)
        os.close(status_read)
        _die_with_parent(alive_read)
        _run_init(status_write)  # returns in the worker only
        return
    os.close(alive_read)
    os.close(status_write)
    _keep(pid, status_read, parent_alive, poll_s)


def _die_with_parent(alive_read: int) -> None:
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(1)
    # getppid says 0 across the namespace's edge: the pipe tells whether the keeper ended
    # before PDEATHSIG took effect.
    if select.select([alive_read], [], [], 0)[0]:
        os._exit(1)
    os.close(alive_read)


def _run_init(status_write: int) -> None:
    """As the namespace's init: fork the worker and return in it; reap until it ends, hand
    its wait status to the keeper, and end (which ends every process left in the namespace)."""
    init_alive_read, init_alive_write = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.close(init_alive_write)
        os.close(status_write)
        _die_with_parent(init_alive_read)
        return
    os.close(init_alive_read)
    _quiet_streams()
    while True:
        ended, status = os.wait()
        if ended == worker:
            os.write(status_write, status.to_bytes(4, "little"))
            os._exit(0)


def _keep(pid: int, status_read: int, parent_alive: Callable[[], bool], poll_s: float) -> None:
    _quiet_streams()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            break
        if not parent_alive():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        signal.sigtimedwait({signal.SIGCHLD}, poll_s)
    told = os.read(status_read, 4)
    if len(told) == 4:  # the worker's own status, else init's (killed with it)
        status = int.from_bytes(told, "little")
    if os.WIFSIGNALED(status):
        ending = os.WTERMSIG(status)
        # SIGKILL's handler cannot be set (OSError): trying ended this process with status 1,
        # and an out-of-memory kill of the worker read "exit status 1: no output"
        if ending != signal.SIGKILL:
            signal.signal(ending, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {ending})
        os.kill(os.getpid(), ending)
    os._exit(os.waitstatus_to_exitcode(status))


def _quiet_streams() -> None:
    """Drop this process's copies of the worker's stdin, stdout and stderr."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def mount_private_proc() -> bool:
    """A /proc that shows this PID namespace only; False where the kernel refuses (a container
    whose own /proc is partly masked), and the caller then keeps /proc out of reach."""
    if _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    return bool(_libc.mount(b"proc", b"/proc", b"proc", flags, None) == 0)


def limit_pids(count: int) -> bool:
    """At most `count` processes and threads in this PID namespace (pid_max is per namespace
    from Linux 6.14); False where the kernel keeps one pid_max for all."""
    with contextlib.suppress(OSError):
        _write("/proc/sys/kernel/pid_max", str(max(count, _PID_MAX_MIN)))
        return True
    return False


def drop_capabilities() -> None:
    """Give up the capabilities the user namespace granted (mount, pid_max are done)."""

    class _Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header = _Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_Data * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise NamespaceError(ctypes.get_errno(), "capset failed")


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)
