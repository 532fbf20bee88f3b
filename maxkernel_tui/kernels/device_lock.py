"""One user of the TPU at a time. On a TPU VM only one process may hold the chips, so every worker
that runs on the TPU (the timing worker, a device-traced profile) takes its turn under an
exclusive lock on a file in this user's cache dir: two sessions, or the workbench and a CLI
`eval`, then wait for each other instead of failing with the TPU busy. No jax here.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.workers import FailureKind, WorkerFailure

POLL_S = 0.1  # how often a waiting process asks for the lock again


def lock_path() -> Path:
    return cache_dir() / "tpu.lock"


@contextmanager
def device_turn(timeout: float) -> Iterator[None]:
    """Hold the TPU for the body; WorkerFailure (kind BUSY) naming the holder's process id when
    another process keeps it for `timeout` seconds."""
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        deadline = time.monotonic() + timeout
        while not _try_lock(handle.fileno()):
            if time.monotonic() >= deadline:
                raise WorkerFailure(
                    f"the TPU stayed in use for {timeout:.0f} s by process {_holder(path)} "
                    f"(lock {path})",
                    FailureKind.BUSY,
                )
            time.sleep(POLL_S)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(path: Path) -> str:
    """The process id the holder wrote, or "unknown" (it may be writing it just now)."""
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"
