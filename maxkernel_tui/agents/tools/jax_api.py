"""The `jax_api` tool's side in this process: one long-lived sandboxed worker (jax_api_worker.py,
started on the first lookup, forked from the fork server where there is one) answers every
lookup of a session; answers are kept, since the installed jax does not change while it runs.
No jax here.
"""

from __future__ import annotations

import asyncio
import json
import threading

from maxkernel_tui.kernels.workers import (
    LineWorker,
    WorkerFailure,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

WORKER_MODULE = "maxkernel_tui.agents.tools.jax_api_worker"
LOOKUP_TIMEOUT_S = 60.0


class LookupFailed(Exception):
    """The name has no answer; the message says why (for the model)."""


class JaxApi:
    def __init__(self) -> None:
        self._worker: LineWorker | None = None
        self._answers: dict[str, str] = {}
        self._lock = threading.Lock()

    async def lookup(self, name: str) -> str:
        """What the installed jax says about `name`; LookupFailed with the reason otherwise."""
        return await asyncio.to_thread(self._lookup, name.strip())

    def _lookup(self, name: str) -> str:
        with self._lock:
            if name in self._answers:
                return self._answers[name]
            if self._worker is None:
                # a model chooses the names: sandboxed like the harness's workers (kernels/sandbox),
                # with a scrubbed environment (no credentials) and jax on the CPU
                self._worker = LineWorker(
                    python_module_argv(WORKER_MODULE), jax_worker_env(), sandbox=sandbox_policy()
                )
            try:
                answer = self._worker.ask(json.dumps({"name": name}), LOOKUP_TIMEOUT_S)
            except WorkerFailure as failure:
                raise LookupFailed(f"the lookup process failed: {failure}") from None
            if "text" not in answer:
                raise LookupFailed(str(answer.get("error", "no answer")))
            self._answers[name] = str(answer["text"])
            return self._answers[name]

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None
