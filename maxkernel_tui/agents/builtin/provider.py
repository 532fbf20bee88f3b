"""The built-in offline agent behind the provider interface (agents/llm/provider.py): no API key,
no network. No jax in this process.

It answers from `Request.context` (the sub-agent contract), never from the prompt's prose: the
profiler step here, from the profile's figures (diagnosis.py); every other step in a worker
process that imports jax (worker.py), started on the first such step (or by `draft_ahead`,
while the session describes the task) and kept until `aclose`, so drafts it caches serve later
steps. The blocking worker calls run in a thread, one at a time. Its answers cost nothing and
use no model tokens: it reports zero tokens. Its debugger, offered the `lower` tool, lowers each
fix before proposing it (tool_use.py), so the offline path runs the same tool loop as a model's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from dataclasses import replace
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.background import in_daemon_thread
from maxkernel_tui.agents.builtin.context import read_context
from maxkernel_tui.agents.builtin.diagnosis import diagnose
from maxkernel_tui.agents.builtin.errors import BuiltinAgentError, CannotPlanError
from maxkernel_tui.agents.builtin.reply import DRAFT_AHEAD, Failure, WorkerReply
from maxkernel_tui.agents.builtin.strategy_moves import no_move
from maxkernel_tui.agents.builtin.tester import answer_tester
from maxkernel_tui.agents.builtin.tool_use import (
    LOWER,
    MAX_LOWERS,
    lowered_so_far,
    lowers_first,
    note,
)
from maxkernel_tui.agents.llm.errors import ProviderError
from maxkernel_tui.agents.llm.types import (
    Finish,
    ProviderChunk,
    Request,
    TextDelta,
    TokenCount,
    ToolCall,
    ToolCallChunk,
)
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.roles.parsers import parse_kernel
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.sandbox.policy import XlaCache
from maxkernel_tui.kernels.snapshot import folder_digest
from maxkernel_tui.kernels.targets import DEFAULT_TARGET
from maxkernel_tui.kernels.workers import (
    FailureKind,
    LineWorker,
    WorkerFailure,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

MODEL = "builtin"
WORKER_MODULE = "maxkernel_tui.agents.builtin.worker"
# Below the client's per-attempt timeout (300 s), so that the worker, not the client, gives up
# first and the worker's process group is killed rather than left drafting.
DEFAULT_STEP_TIMEOUT_S = 240.0


class BuiltinProvider:
    name = "builtin"

    def __init__(
        self, *, target: str = DEFAULT_TARGET, step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    ) -> None:
        self.model = MODEL
        self.target = target  # when a step's context names none
        self._step_timeout_s = step_timeout_s
        self._worker: LineWorker | None = None
        self._lock = asyncio.Lock()

    async def stream(self, request: Request) -> AsyncGenerator[ProviderChunk, None]:
        # the tester is static: no worker needed (tester.py)
        if (request.context or {}).get("role") == Role.TESTER:
            yield TextDelta(answer_tester(request.context))
            yield TokenCount(0, 0)
            yield Finish("stop")
            return
        step = read_context(request.context, self.target)
        role = step.role
        assert role is not None  # read_context requires one of its ROLES
        if lowers_first(role, request):
            async for chunk in self._debug_with_lower(step, request):
                yield chunk
            return
        if role == Role.PROFILER:
            assert step.profile is not None  # read_context requires it for this role
            text = diagnose(step.profile, step.target)
        else:
            text = await self._ask_worker(step.task_dir, step.to_request(role))
        yield TextDelta(text)
        yield TokenCount(0, 0)
        yield Finish("stop")

    async def _debug_with_lower(
        self, step: StepContext, request: Request
    ) -> AsyncGenerator[ProviderChunk, None]:
        """The debugger's fix, lowered first (tool_use.py): a fix that did not lower is passed
        over for the next kernel on offer, as if it had failed its evaluation."""
        lowered = lowered_so_far(request)
        failed = [item for item in lowered if item.failed]
        current = replace(step, kernel=failed[-1].source) if failed else step
        # the same fix that was lowered last, if it passed
        text = await self._ask_worker(current.task_dir, current.to_request(Role.DEBUGGER))
        ended = bool(lowered) and not lowered[-1].failed  # passed, or the tool could not say
        if ended or len(lowered) >= MAX_LOWERS:
            yield TextDelta(note(lowered) + text)
            yield TokenCount(0, 0)
            yield Finish("stop")
            return
        call = ToolCall(f"builtin-lower-{len(lowered) + 1}", LOWER, {"source": parse_kernel(text)})
        yield ToolCallChunk(call)
        yield TokenCount(0, 0)
        yield Finish("tool_calls")

    def no_move(self, strategy: str, kernel: str) -> str | None:
        """Why this agent cannot apply a search's `strategy` to `kernel` (None: it can), asked
        before a node is spent on it (agents.search.algorithms.MoveCheck). In this process: the
        moves change declared tunables and need no jax; whether the tolerance allows a precision
        move is the worker's to say."""
        return no_move(kernel, strategy)

    async def draft_ahead(self, task_dir: str, target: str) -> None:
        """Start the worker and draft for the task before the first step asks (the session
        calls this while it describes the task, so jax's import and the drafting overlap the
        description): that step then finds the drafts made. A failure here is left for the
        step to meet and report; cancelled, the drafting stops (its worker is killed, so no
        thread waits on it)."""
        try:
            await self._ask_worker(
                task_dir, {"role": DRAFT_AHEAD, "task_dir": task_dir, "target": target}
            )
        except asyncio.CancelledError:
            if self._worker is not None:
                self._worker.kill()
            raise
        except Exception:  # the step drafts again and says what went wrong
            return

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    async def _ask_worker(self, task_dir: str, request: dict[str, Any]) -> str:
        """The worker's answer to `request` (a step's context, or the draft-ahead request)."""
        async with self._lock:
            if self._worker is None:
                # the cache dir: the worker reads the reference's cost from the task catalog
                env = dict(jax_worker_env(), MAXKERNEL_TUI_CACHE_DIR=str(cache_dir()))
                # the task's code runs there (its jaxpr is read): sandboxed, reading the task
                policy = sandbox_policy(
                    readable=(task_dir, cache_dir()),
                    xla_cache=XlaCache.SHARED,
                    xla_scope=folder_digest(Path(task_dir)),
                )
                self._worker = LineWorker(python_module_argv(WORKER_MODULE), env, sandbox=policy)
            try:
                # a daemon thread: a process that exits does not wait for the worker's answer
                data = await in_daemon_thread(
                    self._worker.ask, json.dumps(request), self._step_timeout_s
                )
            except WorkerFailure as failure:
                # A crashed worker restarts on the next ask; a step that timed out would time out
                # again.
                raise ProviderError(
                    f"the built-in agent's worker failed on the {request['role']} step: {failure}",
                    retryable=failure.kind == FailureKind.DIED,
                ) from None
        reply = WorkerReply.from_json(data)
        if reply.text is not None:
            return reply.text
        if reply.failure is Failure.CANNOT_PLAN:
            raise CannotPlanError(reply.error)
        raise BuiltinAgentError(
            f"the built-in agent could not answer the {request['role']} step: {reply.error}"
        )
