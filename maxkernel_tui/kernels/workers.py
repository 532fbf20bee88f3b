"""Long-lived worker processes that answer one JSON line per request line. No jax here.

A child first imports what it needs and prints one line `{"ready": true}`; only then does
the per-request timeout start, so it measures the task and not jax's import.
The jax side runs in a child process so that the caller never pays jax's import, and so that a
task whose code hangs, crashes or eats memory takes down only its worker: the request gets an
error naming what happened, the worker is restarted and the remaining requests go on.
Children get a scrubbed environment (no credentials) and their own process group.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

_PACKAGE_PARENT = Path(__file__).resolve().parents[2]

# What a child may inherit; everything else (API keys, tokens, cloud credentials) is dropped.
_INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "PYTHONPATH",
              "VIRTUAL_ENV", "XDG_CACHE_HOME")


def scrubbed_env(**overrides: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env["PYTHONUNBUFFERED"] = "1"
    # The child imports this package even when it runs from a source tree.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(_PACKAGE_PARENT), env.get("PYTHONPATH"))))
    env.update(overrides)
    return env


class WorkerFailure(Exception):
    """A request whose worker timed out or died; the message says which and why."""


READY = {"ready": True}
STARTUP_TIMEOUT_S = 180.0


class LineWorker:
    """One child process speaking the line protocol, restartable after a failure."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self._argv = list(argv)
        self._env = env
        self._proc: subprocess.Popen | None = None
        self._stderr = tempfile.TemporaryFile()
        self._buffer = b""

    def ask(self, request: str, timeout: float) -> dict[str, Any]:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(request.encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child already died; _read_line reports how
        line = self._read_line(timeout)
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            raise WorkerFailure(f"worker answered something that is not JSON: {line[:200]!r}") from None

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            _kill_group(self._proc)
        self._proc = None
        self._stderr.close()

    def _start(self) -> None:
        self._stderr.seek(0)
        self._stderr.truncate()
        self._buffer = b""
        self._proc = subprocess.Popen(
            self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=self._env, start_new_session=True,
        )
        greeting = self._read_line(STARTUP_TIMEOUT_S)
        if greeting != json.dumps(READY):
            raise WorkerFailure(f"worker did not start: {greeting[:200]!r}")

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
                    raise WorkerFailure(f"timed out after {timeout:.0f} s (worker killed)")
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    code = self._proc.wait()
                    raise WorkerFailure(f"worker died ({_exit_reason(code)}): {self._stderr_tail()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode(errors="replace")

    def _stderr_tail(self, lines: int = 3) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip().splitlines()
        useful = [t for t in text if t.strip() and "WARNING" not in t]
        return " | ".join(useful[-lines:]) or "no output"


def run_requests(
    requests: Iterable[str],
    argv: Sequence[str],
    *,
    workers: int,
    timeout: float,
    env: dict[str, str] | None = None,
    on_answer: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Send each request to one of `workers` children; failures come back as {"error": ...}."""
    pending: queue.Queue[str] = queue.Queue()
    for request in requests:
        pending.put(request)
    answers: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()

    def serve() -> None:
        worker = LineWorker(argv, env if env is not None else scrubbed_env())
        try:
            while True:
                try:
                    request = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    answer = worker.ask(request, timeout)
                except WorkerFailure as failure:
                    answer = {"error": str(failure)}
                with lock:
                    answers[request] = answer
                    if on_answer is not None:
                        on_answer(request, answer)
        finally:
            worker.close()

    threads = [threading.Thread(target=serve, daemon=True) for _ in range(max(1, min(workers, pending.qsize())))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def python_module_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
