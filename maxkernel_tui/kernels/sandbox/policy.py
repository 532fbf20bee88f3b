"""What a sandboxed worker may touch, as data that crosses from the caller to the worker process
(an environment variable: it holds paths and limits, never secrets). No jax here.

The caller builds a `SandboxPolicy` per worker: the directories it may write (its private
directory), the directories it may read beyond what Python, jax and libtpu need (a task's
snapshot), its resource limits and whether it may see this machine's accelerator. The worker
reads the policy back (`SandboxPolicy.from_env`) and confines itself before any code we did not
write is touched (sandbox/confine.py).
"""

from __future__ import annotations

import json
import os
import re
import site
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path

POLICY_VARIABLE = "MAXKERNEL_TUI_SANDBOX_POLICY"
# The `sandbox` setting (config.py): `off` runs untrusted code without the layers this machine
# lacks (the reports say so); anything else refuses it where a layer is missing.
OPT_OUT_VARIABLE = "MAXKERNEL_TUI_SANDBOX"
OPT_OUT = "off"
SCOPE_PATTERN = re.compile(r"[0-9A-Za-z_-]{1,64}")  # a directory name, never a path
DEFAULT_MAX_PROCESSES = 1024  # threads count: XLA's pools on a large TPU host run hundreds


class Layer(StrEnum):
    """The sandbox's layers, each stopping its own class of attack (README, Sandbox)."""

    USER_NAMESPACE = "user namespace"
    PID_NAMESPACE = "pid namespace"
    PRIVATE_PROC = "private /proc"
    NETWORK_NAMESPACE = "network namespace"
    LANDLOCK_FILES = "landlock files"
    LANDLOCK_NETWORK = "landlock tcp"
    LANDLOCK_SCOPES = "landlock signal and abstract-socket scopes"
    SECCOMP = "seccomp"
    NO_NEW_PRIVS = "no_new_privs"
    PROCESS_LIMIT = "process limit"


# Without these, the guarantees of DESIGN.md §4 do not hold: untrusted code is refused.
REQUIRED_LAYERS = frozenset(
    {
        Layer.USER_NAMESPACE,
        Layer.PID_NAMESPACE,
        Layer.NETWORK_NAMESPACE,
        Layer.LANDLOCK_FILES,
        Layer.SECCOMP,
        Layer.NO_NEW_PRIVS,
    }
)


class XlaCache(StrEnum):
    """What a worker may do with jax's persistent compilation cache. The cache is divided by
    task (`SandboxPolicy.xla_scope`, the task's digest): a worker that runs a task's code writes
    only that task's part, so a task can never plant a compiled program that another task's
    evaluation loads; a worker that runs kernels never writes, so a candidate cannot plant one
    for a later evaluation of its own task either."""

    OFF = "off"
    # read the scope's entries, never write one (workers that run kernels); without a scope the
    # worker reads no entry until it names its task (`confine.use_task_cache`)
    READ = "read"
    SHARED = "shared"  # read and write the scope's entries (workers that run one task's code)


@dataclass(frozen=True)
class SandboxPolicy:
    writable: tuple[str, ...]  # read-write directories: the worker's private directory
    readable: tuple[str, ...] = ()  # read-only beyond the system's: a task's snapshot
    memory_bytes: int | None = None  # RLIMIT_AS
    cpu_seconds: int | None = None  # RLIMIT_CPU
    max_processes: int = DEFAULT_MAX_PROCESSES  # processes and threads in the worker's namespace
    accelerator: bool = False  # the TPU's device files (timing and device traces on a TPU VM)
    xla_cache: XlaCache = XlaCache.READ
    xla_scope: str = ""  # the task whose part of the compilation cache this worker uses
    system: tuple[str, ...] = field(default_factory=lambda: system_readable())

    def __post_init__(self) -> None:
        if self.xla_cache == XlaCache.SHARED and not self.xla_scope:
            raise ValueError(
                "a worker that writes the compilation cache writes one task's part: name the "
                "task (xla_scope)"
            )
        if self.xla_scope and not SCOPE_PATTERN.fullmatch(self.xla_scope):
            raise ValueError(f"not a task digest: {self.xla_scope!r}")

    def to_env(self) -> dict[str, str]:
        return {POLICY_VARIABLE: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SandboxPolicy | None:
        text = (os.environ if env is None else env).get(POLICY_VARIABLE)
        if not text:
            return None
        data = json.loads(text)
        for name in ("writable", "readable", "system"):
            data[name] = tuple(data[name])
        data["xla_cache"] = XlaCache(data["xla_cache"])
        return cls(**data)

    def with_paths(
        self, *, writable: tuple[Path | str, ...] = (), readable: tuple[Path | str, ...] = ()
    ) -> SandboxPolicy:
        return replace(
            self,
            writable=self.writable + tuple(str(p) for p in writable),
            readable=self.readable + tuple(str(p) for p in readable),
        )


def opted_out(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get(OPT_OUT_VARIABLE, "").lower() == OPT_OUT


_PACKAGE_PARENT = Path(__file__).resolve().parents[3]
# System files a Python process with jax and libtpu reads; none holds a user's secret.
_SYSTEM_PATHS = (
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",  # getpwuid (the home directory of the uid); no password is in it
    "/etc/os-release",
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/sys/devices/system/cpu",  # CPU counts and caches (XLA's thread pools)
    "/sys/fs/cgroup",  # the CPU quota
)


def system_readable() -> tuple[str, ...]:
    """What every sandboxed worker reads: the system's libraries, this Python (its prefixes and
    the directories its imports come from) and this package. Never the home directory itself."""
    home = Path.home().resolve()
    places = [*_SYSTEM_PATHS, sys.prefix, sys.base_prefix, sys.exec_prefix, str(_PACKAGE_PARENT)]
    places += site.getsitepackages() + [p for p in sys.path[1:] if p]
    places += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    chosen: list[str] = []
    for place in places:
        resolved = Path(place).resolve()
        if resolved in (home, Path("/")) or not resolved.exists():
            continue
        if str(resolved) not in chosen:
            chosen.append(str(resolved))
    return tuple(chosen)
