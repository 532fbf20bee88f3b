"""Confining a worker process before it touches code we did not write. No jax here (a worker
forked from the server has jax imported already; `confine` only adjusts its settings).

`confine(policy)` runs in the worker while it is still single-threaded, in this order:
resource limits; user, mount, network, IPC, UTS and PID namespaces (this process stays behind
as the keeper and the call returns in the PID namespace's first process); a private /proc and a
pid_max of the namespace; no_new_privs; Landlock; seccomp; then a Python audit hook that notes
what the code tried and the layers refused, for the report (an informant, not a defence: native
code bypasses it; the kernel's layers do not care).
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from maxkernel_tui.kernels.sandbox import landlock, namespaces, seccomp
from maxkernel_tui.kernels.sandbox.policy import (
    REQUIRED_LAYERS,
    SCOPE_PATTERN,
    Layer,
    SandboxPolicy,
    XlaCache,
    opted_out,
)

_ACCELERATOR_DEVICES = ("/dev/accel0", "/dev/accel1", "/dev/accel2", "/dev/accel3", "/dev/vfio")


class SandboxUnavailable(RuntimeError):
    """A required layer could not be entered and the user has not opted out."""


@dataclass
class Confinement:
    """The layers in force in this process, and those missing with the reason."""

    active: list[Layer] = field(default_factory=list)
    missing: dict[Layer, str] = field(default_factory=dict)

    def lacks_required(self) -> list[Layer]:
        return sorted(REQUIRED_LAYERS & set(self.missing), key=list(Layer).index)


_state = Confinement()
_refused: list[str] = []


def confine(policy: SandboxPolicy, parent_alive: Callable[[], bool]) -> Confinement:
    """Enter every layer this machine has; raise SandboxUnavailable when a required one is
    missing, unless the user opted out (then the worker runs with what it has). The process
    left outside the PID namespace ends the worker once `parent_alive()` is false."""
    global _state
    state = Confinement()
    _set_limits(policy)
    try:
        namespaces.enter_user_namespace()
    except (OSError, namespaces.NamespaceError) as error:
        for layer in (Layer.USER_NAMESPACE, Layer.PID_NAMESPACE, Layer.NETWORK_NAMESPACE):
            state.missing[layer] = f"unshare: {error}"
    else:
        state.active += [Layer.USER_NAMESPACE, Layer.NETWORK_NAMESPACE]
        namespaces.fork_namespace_init(parent_alive)  # returns in the namespace's first process
        state.active.append(Layer.PID_NAMESPACE)
        _in_namespace(policy, state)
    readable = list(policy.system) + list(policy.readable)
    if Layer.PRIVATE_PROC in state.active:
        readable.append("/proc")
    if policy.accelerator:
        readable += _ACCELERATOR_DEVICES
    cache = _task_cache(policy)
    if cache is not None:
        readable.append(cache)
    shared_cache = [cache] if policy.xla_cache == XlaCache.SHARED and cache else []
    writable = [*policy.writable, "/dev/null", *shared_cache] + (
        list(_ACCELERATOR_DEVICES) if policy.accelerator else []
    )
    _lock_down(readable, writable, state)
    _state = state
    if state.lacks_required() and not opted_out():
        names = ", ".join(f"{layer} ({state.missing[layer]})" for layer in state.lacks_required())
        raise SandboxUnavailable(f"sandbox layers missing here: {names}")
    _configure_xla_cache(policy, cache)
    sys.dont_write_bytecode = True  # a module imported here would try its __pycache__
    sys.addaudithook(_Informant(tuple(writable), readable))
    return state


def use_task_cache(scope: str) -> None:
    """Read the compilation cache's part of the task `scope` (its digest), in a worker started
    before its task was known (the warm pool's candidates). Call before anything compiles."""
    base = os.environ.get(_BASE_VARIABLE)
    if not base or not SCOPE_PATTERN.fullmatch(scope):
        return
    _point_jax_at(os.path.join(base, _TASKS, scope))


def confinement() -> Confinement:
    """What `confine` put in force in this process (nothing before it ran)."""
    return _state


def drain_refusals() -> list[str]:
    """What the code tried that the sandbox refuses, noted since the last call."""
    taken = list(_refused)
    _refused.clear()
    return taken


def _set_limits(policy: SandboxPolicy) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if policy.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (policy.memory_bytes, policy.memory_bytes))
    if policy.cpu_seconds is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (policy.cpu_seconds, policy.cpu_seconds + 5))


def _in_namespace(policy: SandboxPolicy, state: Confinement) -> None:
    if namespaces.mount_private_proc():
        state.active.append(Layer.PRIVATE_PROC)
    else:
        state.missing[Layer.PRIVATE_PROC] = "the kernel refused a new /proc: /proc left unreadable"
    # Per user namespace from Linux 5.14 (where the uid is not root), and per PID namespace
    # from 6.14 (pid_max): either bounds a fork bomb.
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    cap = (
        policy.max_processes
        if nproc == resource.RLIM_INFINITY
        else min(policy.max_processes, nproc)
    )
    resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    if namespaces.limit_pids(policy.max_processes) or os.getuid() != 0:
        state.active.append(Layer.PROCESS_LIMIT)
    else:
        state.missing[Layer.PROCESS_LIMIT] = "pid_max is not per namespace in this kernel"
    try:
        namespaces.drop_capabilities()
    except OSError as error:
        state.missing[Layer.USER_NAMESPACE] = f"capabilities kept: {error}"


def _lock_down(readable: list[str], writable: list[str], state: Confinement) -> None:
    try:
        seccomp.set_no_new_privs()
        state.active.append(Layer.NO_NEW_PRIVS)
    except OSError as error:
        state.missing[Layer.NO_NEW_PRIVS] = str(error)
        return
    try:
        protections = landlock.restrict(readable, writable)
    except OSError as error:
        state.missing[Layer.LANDLOCK_FILES] = str(error)
    else:
        state.active.append(Layer.LANDLOCK_FILES)
        for name, layer in (("tcp", Layer.LANDLOCK_NETWORK), ("scopes", Layer.LANDLOCK_SCOPES)):
            if name in protections:
                state.active.append(layer)
            else:
                state.missing[layer] = f"Landlock ABI {landlock.abi_version()} has no {name}"
    try:
        seccomp.install()
        state.active.append(Layer.SECCOMP)
    except OSError as error:
        state.missing[Layer.SECCOMP] = str(error)


_NEVER_S = 1e9  # a compile never takes this long: nothing is written
_TASKS = "tasks"  # the cache's parts, one per task digest
_BASE_VARIABLE = "MAXKERNEL_TUI_XLA_CACHE_BASE"  # the whole cache: `use_task_cache` picks a part


def _task_cache(policy: SandboxPolicy) -> str | None:
    """The directory of the compilation cache this worker may use: its task's part, or where it
    names no task and only reads, every task's part (it picks one with `use_task_cache`).
    Created before Landlock, which only grants existing paths."""
    base = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not base or policy.xla_cache == XlaCache.OFF:
        return None
    cache = os.path.join(base, _TASKS, policy.xla_scope)  # the scope may be empty: every part
    try:
        os.makedirs(cache, exist_ok=True)
    except OSError:
        return None
    return cache.rstrip(os.sep)


def _configure_xla_cache(policy: SandboxPolicy, cache: str | None) -> None:
    """The persistent compilation cache as the policy says, set before jax first uses it (in
    the variables for a fresh worker, in the config of the jax a fork server imported). Read
    only: no eviction (whose lock and access times are writes) and nothing worth writing. A
    reader that names no task reads nothing until `use_task_cache`."""
    base = os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    if policy.xla_cache == XlaCache.READ:
        os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = "-1"
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = str(_NEVER_S)
        _set_jax(
            {
                "jax_compilation_cache_max_size": -1,
                "jax_persistent_cache_min_compile_time_secs": _NEVER_S,
            }
        )
    if cache is None or (policy.xla_cache == XlaCache.READ and not policy.xla_scope):
        if cache is not None and base is not None:
            os.environ[_BASE_VARIABLE] = base
        _set_jax({"jax_enable_compilation_cache": False})
        return
    _point_jax_at(cache)


def _point_jax_at(cache: str) -> None:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
    os.environ.pop("JAX_ENABLE_COMPILATION_CACHE", None)
    _set_jax({"jax_enable_compilation_cache": True, "jax_compilation_cache_dir": cache})


def _set_jax(settings: dict[str, object]) -> None:
    jax = sys.modules.get("jax")
    if jax is not None:
        for name, value in settings.items():
            jax.config.update(name, value)
    elif settings.get("jax_enable_compilation_cache") is False:
        os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"


_PROCESS_EVENTS = {
    "os.exec": "start a program",
    "os.posix_spawn": "start a program",
    "os.spawn": "start a program",
    "os.system": "run a shell command",
    "subprocess.Popen": "start a program",
    "os.fork": "fork a process",
    "os.forkpty": "fork a process",
    "socket.__new__": "open a socket",
    "socket.connect": "connect a socket",
    "socket.bind": "bind a socket",
    "socket.getaddrinfo": "resolve a network address",
    "urllib.Request": "open a URL",
    "pickle.find_class": "unpickle a class (code from a pickle)",
    "os.kill": "signal a process",
    "os.killpg": "signal a process group",
}
_OPEN_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class _Informant:
    """An audit hook noting attempts the sandbox refuses (at most a few dozen, for a report)."""

    def __init__(self, writable: Iterable[str], readable: Iterable[str]) -> None:
        self._writable = tuple(_as_prefix(p) for p in writable)
        self._readable = tuple(_as_prefix(p) for p in readable) + self._writable
        self._events = frozenset(_PROCESS_EVENTS) | {"open"}

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if event not in self._events or len(_refused) >= 40:
            return
        if event != "open":
            if event in ("os.kill", "os.killpg") and args and args[0] in (0, os.getpid()):
                return
            _refused.append(f"{_PROCESS_EVENTS[event]} ({_brief(args)})")
            return
        path, mode, flags = args
        if not isinstance(path, str | bytes) or path == "":
            return
        name = os.fsdecode(path)
        full = os.path.abspath(name)
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
            isinstance(flags, int) and flags & _OPEN_WRITE_FLAGS
        )
        allowed = self._writable if writes else self._readable
        if full.startswith(allowed) or full + os.sep in allowed:
            return
        if writes or os.path.exists(full):  # a library probing for an absent file is harmless
            _refused.append(f"{'write' if writes else 'read'} {full}")


def _as_prefix(path: str) -> str:
    return str(Path(path)).rstrip(os.sep) + os.sep if Path(path).is_dir() else str(path)


def _brief(args: tuple[object, ...]) -> str:
    return ", ".join(repr(a)[:80] for a in args[:3])
