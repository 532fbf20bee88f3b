"""Long-lived worker processes that answer one JSON line per request line. No jax here.

A child first imports what it needs and prints one line `{"ready": true}`; only then does
the per-request timeout start, so it measures the task and not jax's import.
The jax side runs in a child process so that the caller never pays jax's import, and so that a
task whose code hangs, crashes or eats memory takes down only its worker: the request gets an
error naming what happened, the worker is restarted and the remaining requests go on.
Children get a scrubbed environment (no credentials) and their own process group. A worker
given a `SandboxPolicy` confines itself before it runs anything else (kernels/sandbox): its
private directory is the only place it may write.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.fork_server import ForkedChild, forked_child
from maxkernel_tui.kernels.sandbox.policy import (
    OPT_OUT_VARIABLE,
    SandboxPolicy,
    XlaCache,
)

# XLA on the CPU may by default drop a round trip through a narrower type (f32 -> bf16 -> f32)
# where it fuses (excess precision). Mosaic keeps every rounding a kernel writes, so a kernel
# run in interpret mode is computed with the roundings it writes: it is judged on the numbers a
# TPU computes (1t's dscale sums bf16-rounded rows; with excess precision its interpret run
# summed the f32 ones, 364% of the tolerance).
EXACT_ROUNDING_FLAG = "--xla_allow_excess_precision=false"

XLA_CACHE_BYTES = 2 * 1024**3
XLA_CACHE_MIN_COMPILE_S = 0.1  # below this a compile costs less than reading its entry

_PACKAGE_PARENT = Path(__file__).resolve().parents[2]

# What a child may inherit; everything else (API keys, tokens, cloud credentials) is dropped.
_INHERITED = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "XDG_CACHE_HOME",
    OPT_OUT_VARIABLE,  # the user's choice to run without the sandbox layers this machine lacks
)


def scrubbed_env(**overrides: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env["PYTHONUNBUFFERED"] = "1"
    # The child imports this package even when it runs from a source tree.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(_PACKAGE_PARENT), env.get("PYTHONPATH"))))
    env.update(overrides)
    return env


def jax_worker_env() -> dict[str, str]:
    """The scrubbed environment of a jax worker on a machine with or without a TPU: jax on the
    CPU (tracing, interpret mode), libtpu only for ahead-of-time compiles, which several workers
    do at once; libtpu refuses that ("multi-process lockfile") unless told."""
    return scrubbed_env(JAX_PLATFORMS="cpu", ALLOW_MULTIPLE_LIBTPU_LOAD="1", **xla_cache_env())


def kernel_worker_env() -> dict[str, str]:
    """A jax worker's environment for the process that runs candidate kernels in interpret mode
    (the judge): XLA keeps every rounding a kernel writes, as Mosaic does (EXACT_ROUNDING_FLAG).
    The reference's processes keep XLA's defaults, as XLA computes it on a TPU."""
    return dict(jax_worker_env(), XLA_FLAGS=EXACT_ROUNDING_FLAG)


def device_worker_env() -> dict[str, str]:
    """The scrubbed environment of a jax worker that runs on this machine's TPU (timing, a
    device-traced profile): jax picks its platform, and the compiles go to the shared cache."""
    return scrubbed_env(**xla_cache_env())


def xla_cache_env() -> dict[str, str]:
    """jax's persistent compilation cache, shared by this user's workers: a reference, its
    input draws and a kernel's program compile once across worker processes and sessions
    (a fresh worker otherwise recompiles every eager random draw). Bounded: past the size jax
    evicts the least recently used entries, under a file lock the processes share. Its key is
    a hash of the program and the compile options, so a stale entry is never used.
    MAXKERNEL_TUI_XLA_CACHE is `off` or another directory; the default is the cache dir's `xla`."""
    chosen = os.environ.get("MAXKERNEL_TUI_XLA_CACHE", "")
    if chosen == "off":
        return {}
    base = chosen or str(cache_dir() / "xla")
    prune_task_parts(Path(base))
    return {
        "JAX_COMPILATION_CACHE_DIR": base,
        "JAX_COMPILATION_CACHE_MAX_SIZE": str(XLA_CACHE_BYTES),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": str(XLA_CACHE_MIN_COMPILE_S),
    }


@functools.cache
def prune_task_parts(base: Path, budget: int = XLA_CACHE_BYTES) -> None:
    """Keep the compilation cache's task parts (sandbox/policy.py, XlaCache) within `budget`
    together: jax bounds each part alone, so the least recently written parts go first (the
    newest always stays). Once per process: it walks every entry."""
    parts = [p for p in (base / "tasks").glob("*") if p.is_dir() and not p.is_symlink()]
    sized = []
    for part in parts:
        with contextlib.suppress(OSError):
            entries = [e.stat() for e in part.iterdir() if e.is_file()]
            newest = max((e.st_mtime for e in entries), default=part.stat().st_mtime)
            sized.append((newest, sum(e.st_size for e in entries), part))
    sized.sort(reverse=True)
    total = 0
    for index, (_, size, part) in enumerate(sized):
        total += size
        if index and total > budget:
            shutil.rmtree(part, ignore_errors=True)


def sandbox_policy(
    *,
    readable: Sequence[Path | str] = (),
    writable: Sequence[Path | str] = (),
    xla_cache: XlaCache = XlaCache.READ,
    xla_scope: str = "",
    accelerator: bool = False,
) -> SandboxPolicy:
    """The policy of a worker that runs code we did not write (a kernel, a task's reference, an
    imported module): beyond the system's files it reads `readable` and writes `writable` and
    its private directory (LineWorker adds it). Workers that run kernels only read the
    persistent compilation cache: one they could write would be read by later evaluations. A
    worker that runs one task's code may write that task's part of it (`xla_scope`, the task's
    digest), never another's."""
    return SandboxPolicy(
        writable=tuple(str(p) for p in writable),
        readable=tuple(str(p) for p in readable),
        xla_cache=xla_cache,
        xla_scope=xla_scope,
        accelerator=accelerator,
    )


class FailureKind(StrEnum):
    """How a worker failed a request (`WorkerFailure.kind`)."""

    TIMEOUT = "timeout"
    DIED = "died"
    PROTOCOL = "protocol"  # it answered something other than the protocol's lines
    BUSY = "busy"  # the TPU stayed in use by another process (device_lock)


class WorkerFailure(Exception):
    """A request whose worker timed out or died; the message says which and why."""

    def __init__(self, message: str, kind: FailureKind) -> None:
        super().__init__(message)
        self.kind = kind


READY = {"ready": True}
STARTUP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Limits:
    """Resource limits of a child process, applied before it runs any task code."""

    memory_bytes: int | None = None  # address space (RLIMIT_AS)
    cpu_seconds: int | None = None  # CPU time (RLIMIT_CPU): SIGXCPU past it

    def confined(self, policy: SandboxPolicy) -> SandboxPolicy:
        """`policy` with these limits: a sandboxed worker sets them on itself."""
        return replace(policy, memory_bytes=self.memory_bytes, cpu_seconds=self.cpu_seconds)

    def apply_to(self, pid: int) -> None:
        # prlimit on the new child rather than a preexec_fn: a preexec_fn forces a plain fork of
        # this (multithreaded) process, which jax warns against; the child runs no task code
        # before it has said it is ready, long after this.
        if self.memory_bytes is not None:
            resource.prlimit(pid, resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))
        if self.cpu_seconds is not None:
            resource.prlimit(pid, resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds + 5))


class LineWorker:
    """One child process speaking the line protocol, restartable after a failure. With a
    `sandbox` policy it runs confined (kernels/sandbox) in a private directory, its `cwd` when
    given (the caller's to remove), else one it makes and removes; its limits go in the policy."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        *,
        cwd: str | None = None,
        limits: Limits | None = None,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        self._argv = list(argv)
        self._env = env
        self._limits = limits
        self._sandboxed = sandbox is not None
        self._own_dir = sandbox is not None and cwd is None
        self._cwd = tempfile.mkdtemp(prefix="mkt-worker-") if self._own_dir else cwd
        if sandbox is not None:
            assert self._cwd is not None
            policy = sandbox.with_paths(writable=(self._cwd,))
            for directory in policy.writable:  # Landlock allows only what exists
                Path(directory).mkdir(parents=True, exist_ok=True)
            policy = limits.confined(policy) if limits is not None else policy
            private = {"TMPDIR": self._cwd, "TPU_LOG_DIR": self._cwd}  # libtpu logs to /tmp
            self._env = dict(env, **private, **policy.to_env())
            self._limits = None
        self._proc: subprocess.Popen[bytes] | ForkedChild | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  closed by close()
        self._buffer = b""
        self._oom_kills = oom_kills()  # the system's count when the last request was sent

    def ask(self, request: str, timeout: float) -> dict[str, Any]:
        self.send(request)
        return self.receive(timeout)

    def send(self, request: str) -> None:
        self.start()
        self._oom_kills = oom_kills()
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(request.encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child already died; receive() reports how

    def receive(self, timeout: float) -> dict[str, Any]:
        line = self._read_line(timeout)
        try:
            answer: dict[str, Any] = json.loads(line)
            return answer
        except json.JSONDecodeError:
            raise WorkerFailure(
                f"worker answered something that is not JSON: {line[:200]!r}",
                FailureKind.PROTOCOL,
            ) from None

    def start(self) -> None:
        """Start the child and wait until it says it is ready (no-op when it is running)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._stderr.seek(0)
        self._stderr.truncate()
        self._buffer = b""
        # A jax worker is forked from a server that has imported jax already.
        self._proc = forked_child(
            self._argv, self._env, self._cwd, self._stderr.fileno()
        ) or subprocess.Popen(
            self._argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=self._env,
            cwd=self._cwd,
            start_new_session=True,
        )
        if self._limits is not None:
            self._limits.apply_to(self._proc.pid)
        greeting = self._read_line(STARTUP_TIMEOUT_S)
        if greeting != json.dumps(READY):
            raise WorkerFailure(
                f"worker did not start: {_startup_problem(greeting)}", FailureKind.PROTOCOL
            )

    @property
    def directory(self) -> Path | None:
        """The worker's private directory (sandboxed workers), where it may write."""
        return Path(self._cwd) if self._sandboxed and self._cwd is not None else None

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            _kill_group(self._proc)
        self._proc = None
        self._stderr.close()
        if self._own_dir and self._cwd is not None:
            shutil.rmtree(self._cwd, ignore_errors=True)

    def kill(self) -> None:
        """Stop the child from another thread; a pending `receive` then fails as "died"."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def stderr_tail(self, lines: int = 3) -> str:
        """The last lines the child wrote to stderr, libtpu's start-up warnings left out."""
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip().splitlines()
        useful = [
            t for t in text if t.strip() and "WARNING" not in t and "TPU_WORKER_HOSTNAMES" not in t
        ]
        return " | ".join(useful[-lines:]) or "no output"

    def _read_line(self, timeout: float) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    _kill_group(self._proc)
                    raise WorkerFailure(
                        f"timed out after {timeout:.0f} s (process group killed)",
                        FailureKind.TIMEOUT,
                    )
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    code = self._proc.wait()
                    raise WorkerFailure(
                        f"worker died ({_exit_reason(code, self._oom_kills)}): "
                        f"{self.stderr_tail()}",
                        FailureKind.DIED,
                    )
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode(errors="replace")


class WarmPool:
    """Pre-started single-use workers. Each serves one job in a fresh process with a private
    directory (its cwd and TMPDIR); a replacement starts in the background, so the next job
    does not wait for jax's import. `size=0` starts nothing ahead: for one job, where a spare
    would only be started and closed."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        *,
        size: int = 1,
        limits: Limits | None = None,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        self._argv = list(argv)
        self._env = env
        self._limits = limits
        self._sandbox = sandbox
        self._size = size
        # a started worker, or None where a background start failed (take starts its own)
        self._ready: queue.Queue[tuple[LineWorker, Path] | None] = queue.Queue()
        self._starting = 0  # background starts not yet in `_ready`
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(size):
            self._replenish()

    def take(self) -> tuple[LineWorker, Path]:
        """A started worker and its private directory; the caller closes the worker. One being
        started in the background is waited for rather than started twice."""
        with self._lock:
            waiting = self._starting > 0 or not self._ready.empty()
        taken = None
        if waiting:
            with contextlib.suppress(queue.Empty):  # a start that hangs: take() starts its own
                taken = self._ready.get(timeout=STARTUP_TIMEOUT_S)
        if taken is None:
            taken = self._spawn()
        if self._size:
            self._replenish()
        return taken

    def close(self) -> None:
        self._closed = True
        while not self._ready.empty():
            if (spare := self._ready.get_nowait()) is not None:
                spare[0].close()

    def _replenish(self) -> None:
        def fill() -> None:
            spawned: tuple[LineWorker, Path] | None = None
            with contextlib.suppress(WorkerFailure):  # take() then starts one and says why
                spawned = self._spawn()
            with self._lock:
                self._starting -= 1
                if self._closed and spawned is not None:
                    spawned[0].close()
                else:
                    self._ready.put(spawned)

        with self._lock:
            self._starting += 1
        threading.Thread(target=fill, daemon=True).start()

    def _spawn(self) -> tuple[LineWorker, Path]:
        workdir = Path(tempfile.mkdtemp(prefix="mkt-worker-"))
        worker = LineWorker(
            self._argv,
            dict(self._env, TMPDIR=str(workdir)),
            cwd=str(workdir),
            limits=self._limits,
            sandbox=self._sandbox,
        )
        worker.start()
        return worker, workdir


def run_requests(
    requests: Iterable[str],
    argv: Sequence[str],
    *,
    workers: int,
    timeout: float,
    env: dict[str, str] | None = None,
    on_answer: Callable[[str, dict[str, Any]], None] | None = None,
    stop: threading.Event | None = None,
    sandbox: Callable[[str], SandboxPolicy] | None = None,
) -> dict[str, dict[str, Any]]:
    """Answer each request in a process of its own, at most `workers` at once: requests may run
    code of different origins (one task folder each), and none may see or change another's
    process; `sandbox(request)` is its policy. Failures come back as {"error": ...}. Setting
    `stop` kills the children at once and leaves the requests not yet answered out."""
    pending: queue.Queue[str] = queue.Queue()
    for request in requests:
        pending.put(request)
    answers: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    live: list[LineWorker] = []
    stopped = stop if stop is not None else threading.Event()

    def answer(request: str) -> None:
        try:
            policy = sandbox(request) if sandbox is not None else None
        except Exception as error:  # the caller's policy failed (a folder too large to digest)
            reply: dict[str, Any] = {"error": f"cannot confine its worker: {error}"}
            with lock:
                answers[request] = reply
                if on_answer is not None:
                    on_answer(request, reply)
            return
        worker = LineWorker(argv, env if env is not None else scrubbed_env(), sandbox=policy)
        with lock:
            if stopped.is_set():
                worker.close()
                return
            live.append(worker)
        try:
            try:
                reply = worker.ask(request, timeout)
            except WorkerFailure as failure:
                reply = {"error": str(failure)}
            with lock:
                if stopped.is_set():
                    return  # killed by `stop`: not an answer
                answers[request] = reply
                if on_answer is not None:
                    on_answer(request, reply)
        finally:
            with lock:
                live.remove(worker)
            worker.close()

    def serve() -> None:
        while not stopped.is_set():
            try:
                request = pending.get_nowait()
            except queue.Empty:
                return
            answer(request)

    threads = [
        threading.Thread(target=serve, daemon=True)
        for _ in range(max(1, min(workers, pending.qsize())))
    ]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if stopped.wait(0.1):
            with lock:  # again until all are gone: a worker may be starting right now
                for worker in live:
                    worker.kill()
            for thread in threads:
                thread.join(0.1)
    for thread in threads:
        thread.join()
    return answers


def python_module_argv(module: str, *args: str) -> list[str]:
    """The command line of a worker running `module`, which ends when its parent does."""
    return [sys.executable, "-m", "maxkernel_tui.kernels.worker_main", module, *args]


def _kill_group(proc: subprocess.Popen[bytes] | ForkedChild) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _startup_problem(greeting: str) -> str:
    """What a worker said instead of `ready`: its `error` (e.g. a sandbox this machine cannot
    give, worker_main.settle), else the line itself."""
    try:
        said = json.loads(greeting)
    except json.JSONDecodeError:
        said = None
    if isinstance(said, dict) and isinstance(error := said.get("error"), str):
        return error
    return repr(greeting[:200])


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot (Linux's
    /proc/vmstat), None where that is not known."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _exit_reason(code: int, oom_kills_before: int | None = None) -> str:
    """Why a child ended; a SIGKILL nobody here sent is, most of the time, the out-of-memory
    killer, which writes nothing to the child's stderr: say so, with the evidence."""
    if code == -signal.SIGKILL:
        now = oom_kills()
        if now is not None and oom_kills_before is not None and now > oom_kills_before:
            return (
                "killed by SIGKILL from the kernel's out-of-memory killer: the machine ran "
                f"out of memory while it worked (/proc/vmstat oom_kill {oom_kills_before} -> "
                f"{now})"
            )
        return (
            "killed by SIGKILL, not by a timeout of ours: the system's out-of-memory killer "
            "(or another process) ended it; it could write nothing"
        )
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
