"""The search's caps and concurrency, wrapped around the session's client and tools so that the
engines running expansions need not know: a semaphore over model calls, one over evaluations
(and profiles: both occupy the worker processes, on a TPU the device), and a cap on evaluations.
Tokens and dollars are already capped by the session's Budget inside the client. Both wrap the
engine's protocols (`Client`, `Tools`), so they wrap fakes as well as the real ones. No jax here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from maxkernel_tui.agents.budget import BudgetExceeded
from maxkernel_tui.agents.llm.types import Request, StreamChunk
from maxkernel_tui.agents.orchestration.tools import Client, Tools
from maxkernel_tui.kernels.edge_configs import EdgeConfig
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.service.service import CheckListener, KernelSource, ProfileResult


class EvaluationsExhausted(BudgetExceeded):
    """The search has spent its harness evaluations."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"{cap} evaluations spent (--max-evals {cap})", "evaluations")


class GatedClient:
    """The session's client, at most `limit` streams at a time."""

    def __init__(self, client: Client, limit: int) -> None:
        self.client = client
        self._slots = asyncio.Semaphore(limit)

    async def stream(
        self, request: Request, *, parse: Callable[[str], Any] | None = None
    ) -> AsyncIterator[StreamChunk]:
        async with self._slots:
            async for chunk in self.client.stream(request, parse=parse):
                yield chunk


class CappedTools:
    """The session's tools with at most `limit` evaluations or profiles at a time and at most
    `cap` evaluations in the session (`spent` counts those already stored)."""

    def __init__(self, tools: Tools, limit: int, cap: int | None, spent: int) -> None:
        self.tools = tools
        self.task, self.target = tools.task, tools.target
        self.cap, self.spent = cap, spent
        self._slots = asyncio.Semaphore(limit)

    def exhausted(self) -> bool:
        return self.cap is not None and self.spent >= self.cap

    async def evaluate(
        self,
        kernel: KernelSource,
        on_check: CheckListener | None = None,
        *,
        edges_only: bool = False,
    ) -> EvalReport:
        async with self._slots:
            if self.cap is not None and self.spent >= self.cap:
                raise EvaluationsExhausted(self.cap)
            # counted when it starts: a second evaluation must not slip in meanwhile
            self.spent += 1
            return await self.tools.evaluate(kernel, on_check, edges_only=edges_only)

    async def profile(self, kernel: KernelSource, *, estimate_only: bool = False) -> ProfileResult:
        async with self._slots:
            return await self.tools.profile(kernel, estimate_only=estimate_only)

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        return await self.tools.validate_edge_configs(proposals)

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        self.tools.set_extra_configs(configs)

    def estimate_on(self, target: str) -> None:
        """The score on `target` from now on: the tools' profiles estimate on it too."""
        retarget = getattr(self.tools, "estimate_on", None)
        if retarget is not None:
            retarget(target)
        self.target = target
