"""The reference processes of a harness, one per task: a task's code runs only beside its own.
No jax here (the workers import it).

One process serving every task would let a task folder's code reach the references of the tasks
evaluated after it: a module-level patch of `jax.numpy` stays in the process, and a compiled
program it caches would be loaded by them. Here each task digest gets its own sandboxed worker,
which writes only its task's part of the compilation cache (sandbox/policy.py, `XlaCache`); a
task can fool only its own verdicts, which its reference defines anyway. The most recently used
few stay started, so an evaluation that alternates between two tasks does not restart them.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from maxkernel_tui.kernels.sandbox.policy import XlaCache
from maxkernel_tui.kernels.workers import (
    LineWorker,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

_REFERENCE_WORKER = "maxkernel_tui.kernels.evaluation.reference.worker"
KEPT_STARTED = 2


class ReferenceWorkers:
    """Started reference workers by task digest; the caller serialises their use."""

    def __init__(self, readable: tuple[Path, ...], keep: int = KEPT_STARTED) -> None:
        # where the tasks' snapshots and the production inputs are: read, never written
        self._readable = readable
        self._keep = keep
        self._started: OrderedDict[str, LineWorker] = OrderedDict()

    def worker(self, digest: str) -> LineWorker:
        """The task's worker, started if it is not; the least recently used beyond `keep` end."""
        worker = self._started.pop(digest, None)
        if worker is None:  # a LineWorker starts on its first request, and after a crash
            worker = LineWorker(
                python_module_argv(_REFERENCE_WORKER),
                jax_worker_env(),
                sandbox=sandbox_policy(
                    readable=self._readable, xla_cache=XlaCache.SHARED, xla_scope=digest
                ),
            )
        self._started[digest] = worker
        while len(self._started) > self._keep:
            _, oldest = self._started.popitem(last=False)
            oldest.close()
        return worker

    def close(self) -> None:
        for worker in self._started.values():
            worker.close()
        self._started.clear()
