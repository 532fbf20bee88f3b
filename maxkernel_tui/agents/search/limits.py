"""The search's caps and concurrency, wrapped around the session's client and tools so that the
engines running expansions need not know: a semaphore over model calls, one over evaluations
(and profiles: both occupy the worker processes, on a TPU the device), and a cap on evaluations.
Tokens and dollars are already capped by the session's Budget inside the client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.budget import BudgetExceeded
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.orchestration.tools import KernelTools


class EvaluationsExhausted(BudgetExceeded):
    """The search has spent its harness evaluations."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"{cap} evaluations spent (--max-evals {cap})", "evaluations")


class GatedClient:
    """The session's client, at most `limit` streams at a time."""

    def __init__(self, client: LLMClient, limit: int) -> None:
        self.client, self.provider = client, client.provider
        self._slots = asyncio.Semaphore(limit)

    async def stream(self, request: Any, **options: Any) -> AsyncIterator[Any]:
        async with self._slots:
            async for chunk in self.client.stream(request, **options):
                yield chunk


class CappedTools:
    """The session's tools with at most `limit` evaluations or profiles at a time and at most
    `cap` evaluations in the session (`spent` counts those already stored)."""

    def __init__(self, tools: KernelTools, limit: int, cap: int | None, spent: int) -> None:
        self.tools = tools
        self.task, self.target = tools.task, tools.target
        self.cap, self.spent = cap, spent
        self._slots = asyncio.Semaphore(limit)

    def exhausted(self) -> bool:
        return self.cap is not None and self.spent >= self.cap

    async def evaluate(
        self, kernel: Path, on_check: Callable[[Any], None] | None = None
    ) -> dict[str, Any]:
        async with self._slots:
            if self.cap is not None and self.spent >= self.cap:
                raise EvaluationsExhausted(self.cap)
            self.spent += (
                1  # counted when it starts: a second evaluation must not slip in meanwhile
            )
            return await self.tools.evaluate(kernel, on_check)

    async def profile(
        self, kernel: Path, *, estimate_only: bool = False
    ) -> tuple[dict[str, Any] | None, str, str | None]:
        async with self._slots:
            return await self.tools.profile(kernel, estimate_only=estimate_only)
