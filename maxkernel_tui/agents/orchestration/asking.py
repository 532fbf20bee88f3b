"""One model call of a step: a stored answer is reused; otherwise the call is streamed, its text
logged a few times a second, each attempt's usage recorded in the store, and the answer stored
under the step's key, so that a resumed session never pays for it again. No jax here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from maxkernel_tui.agents.llm.types import Discarded, Done, Response, TextDelta, UsageChunk
from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.events import (
    ErrorRaised,
    LlmAnswer,
    SessionEvent,
    TextChunk,
    UsageReport,
)
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.orchestration.tools import Client
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.roles.prompts import build_request

# streamed text reaches the log (and the UI) a few times a second, not per token
TEXT_FLUSH_S = 0.25
TEXT_FLUSH_CHARS = 4000

Parse = Callable[[str], str]


class _TextLog:
    """Streamed text, coalesced into `TextChunk` events."""

    def __init__(self, emit: Callable[[SessionEvent], Any], key: str, role: str) -> None:
        self.emit, self.key, self.role = emit, key, role
        self.pieces: list[str] = []
        self.flushed_at, self.count = time.monotonic(), 0

    def add(self, text: str) -> None:
        self.pieces.append(text)
        late = time.monotonic() - self.flushed_at > TEXT_FLUSH_S
        if late or sum(map(len, self.pieces)) > TEXT_FLUSH_CHARS:
            self.flush()

    def flush(self) -> None:
        if self.pieces:
            ref = keys.sub(self.key, f"text{self.count}")
            self.emit(TextChunk(ref, self.key, self.role, "".join(self.pieces)))
            self.pieces.clear()
            self.flushed_at, self.count = time.monotonic(), self.count + 1


class ModelCalls:
    def __init__(
        self,
        journal: Journal,
        client: Client,
        emit: Callable[[SessionEvent], Any],
        model: str | None,
    ) -> None:
        self.journal, self.client, self.emit, self.model = journal, client, emit, model

    async def ask(self, key: str, role: str, ctx: StepContext, parse: Parse) -> str:
        """`role`'s answer for step `key`, parsed."""
        stored = self.journal.recall(keys.sub(key, "llm"), LlmAnswer)
        if stored is not None:
            return parse(stored.text)
        answer = await self._stream(key, role, ctx, parse)
        usage = answer.usage
        self.emit(
            LlmAnswer(
                keys.sub(key, "llm"),
                key,
                role,
                answer.text,
                usage.model,
                usage.tokens,
                usage.cost_usd,
            )
        )
        return answer.parsed if isinstance(answer.parsed, str) else parse(answer.text)

    async def _stream(self, key: str, role: str, ctx: StepContext, parse: Parse) -> Response:
        text = _TextLog(self.emit, key, role)
        answer = None
        request = build_request(role, ctx, model=self.model)
        async for chunk in self.client.stream(request, parse=parse):
            if isinstance(chunk, TextDelta):
                text.add(chunk.text)
            elif isinstance(chunk, UsageChunk):
                text.flush()
                self._record_usage(key, chunk)
            elif isinstance(chunk, Discarded):
                ref = keys.sub(key, f"discarded{chunk.attempt}")
                why = f"attempt {chunk.attempt} discarded: {chunk.reason}"
                self.emit(ErrorRaised(ref, key, role, why))
            elif isinstance(chunk, Done):
                answer = chunk.response
            # other chunks (tool calls, a client's notices) say nothing the session keeps
        assert answer is not None, "a stream ends with Done or raises"
        return answer

    def _record_usage(self, key: str, chunk: UsageChunk) -> None:
        store, session_id, usage = self.journal.store, self.journal.session_id, chunk.usage
        store.record_llm_call(
            session_id,
            model=usage.model,
            provider=usage.provider,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost=usage.cost_usd or 0.0,
            latency_s=usage.latency_s,
        )
        tokens, cost = store.usage(session_id)
        self.emit(
            UsageReport(
                keys.sub(key, f"usage{chunk.attempt}"),
                key,
                usage.model,
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cost_usd,
                usage.estimated,
                tokens,
                cost,
            )
        )
