"""An exception as the one line a check shows, and why a worker failed. No jax here."""

from __future__ import annotations

import resource

from maxkernel_tui.kernels.report.reasons import Reason, WorkerFailed
from maxkernel_tui.kernels.workers import FailureKind, WorkerFailure


def first_lines(error: BaseException, limit: int = 700) -> str:
    """The error's type and message without traceback lines, joined into one line; a
    MemoryError also says which limit it met."""
    text = f"{type(error).__name__}: {error}".strip()
    if isinstance(error, MemoryError):
        limit_bytes = resource.getrlimit(resource.RLIMIT_AS)[0]
        cap = (
            f"{limit_bytes / 2**30:.0f} GiB"
            if limit_bytes != resource.RLIM_INFINITY
            else "the machine's"
        )
        text = f"out of memory (process limit {cap}): {text}"
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("  File ")]
    return " | ".join(lines)[:limit]


# What a worker's last words say when it ran out of memory.
OOM_SIGNS = (
    "MemoryError",
    "RESOURCE_EXHAUSTED",
    "bad_alloc",
    "Cannot allocate memory",
)


def worker_failure(
    failure: WorkerFailure, memory_bytes: int | None, process: str
) -> tuple[Reason, WorkerFailed]:
    """Why a worker that timed out, ran out of memory or crashed while it ran a kernel stopped;
    `process` names the worker (the tracer, the candidate)."""
    text = str(failure)
    if failure.kind == FailureKind.TIMEOUT:
        return Reason.WORKER_TIMED_OUT, WorkerFailed(process, text)
    if any(sign in text for sign in OOM_SIGNS):
        limit = memory_bytes / 2**30 if memory_bytes else None
        return Reason.WORKER_OUT_OF_MEMORY, WorkerFailed(process, text, limit)
    return Reason.WORKER_CRASHED, WorkerFailed(process, text)
