"""The one interface every model provider implements.

A provider makes exactly one attempt per `stream` call: no retries, no budget, no timeout;
`client.LLMClient` adds those. It yields `TextDelta` and `ToolCallChunk` as they arrive, at most
one latest `TokenCount`, and a `Finish` last; a stream that ends without `Finish` raises
`StreamBroken`. Failures are `ProviderError`s with `retryable` set. Cancelling the consuming task,
or closing the iterator, closes the HTTP stream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol, runtime_checkable

from maxkernel_tui.agents.llm.types import ProviderChunk, Request


class Provider(Protocol):
    name: str  # "gemini", "openai", ...: what Usage and the price table see
    model: str  # used when a request names none

    def stream(self, request: Request) -> AsyncGenerator[ProviderChunk, None]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class DraftsAhead(Protocol):
    """A provider with work to do on a task before its first step (the built-in agent drafts
    its kernels): the session starts it while it describes the task, and cancels it on close."""

    async def draft_ahead(self, task_dir: str, target: str) -> None: ...
