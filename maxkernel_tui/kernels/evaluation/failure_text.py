"""An exception, or a worker's failure, as the one line a check's detail shows. No jax here."""

from __future__ import annotations

import resource

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


def worker_failure_detail(failure: WorkerFailure, memory_bytes: int | None, process: str) -> str:
    """A check's detail for a worker that timed out, ran out of memory or crashed while it ran
    a kernel; `process` names the worker (the tracer, the candidate)."""
    if failure.kind == FailureKind.TIMEOUT:
        return f"the kernel {failure}"
    text = str(failure)
    if any(sign in text for sign in OOM_SIGNS):
        limit = f" (limit {memory_bytes / 2**30:.0f} GiB)" if memory_bytes else ""
        return f"out of memory{limit}: the {process} process {text}"
    return f"the {process} process crashed: {text}"
