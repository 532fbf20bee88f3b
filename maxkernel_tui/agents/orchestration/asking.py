"""One model call of a step, with its tool loop: a stored answer is reused; otherwise the call is
streamed, its text logged a few times a second, each attempt's usage recorded in the store, and
the answer stored under the step's key, so that a resumed session never pays for it again.

A role offered tools (agents/tools) may answer with tool calls instead: each turn that calls
tools is stored (`ToolsCalled`), each call is carried out and its result stored
(`ToolAnswered`) and given back, and the model is asked again, until it answers. On resume the
stored turns and results are replayed: neither the model nor the tool is called again. Calls
past the role's limit per step are refused (the result says so); a model that calls again after
that is stopped (`ToolLoopStopped`). Every turn is a model call under the session's budget.
No jax here."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from maxkernel_tui.agents.llm.errors import LLMError
from maxkernel_tui.agents.llm.types import (
    Discarded,
    Done,
    Message,
    Request,
    Response,
    Speaker,
    TextDelta,
    ToolCall,
    UsageChunk,
)
from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.events import (
    ErrorRaised,
    LlmAnswer,
    SessionEvent,
    TextChunk,
    ToolAnswered,
    ToolsCalled,
    UsageReport,
)
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.orchestration.tools import Client
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.roles.prompts import build_request
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.agents.tools.assignment import RolePlan
from maxkernel_tui.agents.tools.runner import Toolbox, ToolResult
from maxkernel_tui.agents.tools.specs import SPECS, ToolName

# streamed text reaches the log (and the UI) a few times a second, not per token
TEXT_FLUSH_S = 0.25
TEXT_FLUSH_CHARS = 4000

Parse = Callable[[str], str]


class _TextLog:
    """Streamed text, coalesced into `TextChunk` events."""

    def __init__(self, emit: Callable[[SessionEvent], Any], key: str, role: Role) -> None:
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


class ToolLoopStopped(LLMError):
    """The model called tools again after its step's limit was reached and its calls refused."""


class ModelCalls:
    def __init__(
        self,
        journal: Journal,
        client: Client,
        emit: Callable[[SessionEvent], Any],
        model: str | None,
        *,
        roles: RolePlan | None = None,
        toolbox: Toolbox | None = None,
    ) -> None:
        self.journal, self.client, self.emit, self.model = journal, client, emit, model
        self.roles = roles or RolePlan()
        self.toolbox = toolbox

    def model_of(self, role: Role) -> str | None:
        """The model `role` asks: its own, else the session's (None: the provider's)."""
        return self.roles.of(role).model or self.model

    def tools_of(self, role: Role) -> tuple[ToolName, ...]:
        """The tools `role` is offered here (none without a toolbox)."""
        return self.roles.of(role).tools if self.toolbox is not None else ()

    async def ask(self, key: str, role: Role, ctx: StepContext, parse: Parse) -> str:
        """`role`'s answer for step `key`, parsed."""
        stored = self.journal.recall(keys.sub(key, "llm"), LlmAnswer)
        if stored is not None:
            return parse(stored.text)
        offered = self.tools_of(role)
        request = build_request(
            role, ctx, model=self.model_of(role), tools=tuple(SPECS[t] for t in offered)
        )
        turns: list[ToolsCalled] = []
        answer = await self._converse(key, role, ctx, parse, request, offered, turns)
        usage = answer.usage
        # the step's whole conversation: the turns that called tools are part of its price
        costs = [usage.cost_usd, *(turn.cost_usd for turn in turns)]
        self.emit(
            LlmAnswer(
                keys.sub(key, "llm"),
                key,
                role,
                answer.text,
                usage.model,
                usage.tokens + sum(turn.tokens for turn in turns),
                None if None in costs else sum(c for c in costs if c is not None),
            )
        )
        return answer.parsed if isinstance(answer.parsed, str) else parse(answer.text)

    async def _converse(
        self,
        key: str,
        role: Role,
        ctx: StepContext,
        parse: Parse,
        request: Request,
        offered: tuple[ToolName, ...],
        turns: list[ToolsCalled],
    ) -> Response:
        """Model turns until one answers without tool calls (the answer); stored turns and
        results replayed. The turns that called tools are appended to `turns`."""
        limit = self.roles.of(role).max_tool_calls
        messages, made, refused, turn = list(request.messages), 0, False, 0
        while True:
            base = keys.model_turn(key, turn)
            asked = self.journal.recall(keys.sub(base, "tools"), ToolsCalled)
            if asked is None:
                answer = await self._stream(
                    base, role, replace(request, messages=tuple(messages)), parse
                )
                if not answer.tool_calls:
                    return answer
                if refused:
                    raise ToolLoopStopped(
                        f"{role} called tools again after its limit of {limit} calls per step "
                        "was reached and its calls refused; the step stops here"
                    )
                asked = self.emit(self._turn(base, key, role, turn, answer))
            turns.append(asked)
            calls = [ToolCall(**call) for call in asked.calls]
            messages.append(Message(Speaker.ASSISTANT, asked.text, tool_calls=tuple(calls)))
            refused = refused or made + len(calls) > limit
            for j, call in enumerate(calls):
                answered = self.journal.recall(keys.sub(base, f"tool{j}"), ToolAnswered)
                if answered is None:
                    result = await self._carry_out(call, offered, ctx, made, limit)
                    answered = self.emit(
                        ToolAnswered(
                            keys.sub(base, f"tool{j}"),
                            key,
                            role,
                            call.id,
                            call.name,
                            call.arguments,
                            result.ok,
                            result.text,
                            round(result.seconds, 3),
                        )
                    )
                made += 1
                messages.append(
                    Message(Speaker.TOOL, answered.text, tool_call_id=call.id, name=call.name)
                )
            turn += 1

    @staticmethod
    def _turn(base: str, key: str, role: Role, turn: int, answer: Response) -> ToolsCalled:
        usage = answer.usage
        calls = [asdict(call) for call in answer.tool_calls]
        return ToolsCalled(
            keys.sub(base, "tools"),
            key,
            role,
            turn,
            answer.text,
            calls,
            usage.model,
            usage.tokens,
            usage.cost_usd,
        )

    async def _carry_out(
        self,
        call: ToolCall,
        offered: tuple[ToolName, ...],
        ctx: StepContext,
        made: int,
        limit: int,
    ) -> ToolResult:
        if made >= limit:
            return ToolResult(
                f"refused: this step's limit of {limit} tool calls is reached. Answer now, "
                "without calling tools.",
                False,
                0.0,
            )
        if self.toolbox is None:
            return ToolResult("error: no tools are offered here; answer without them", False, 0.0)
        return await self.toolbox.run(call, offered, ctx)

    async def _stream(self, key: str, role: Role, request: Request, parse: Parse) -> Response:
        text = _TextLog(self.emit, key, role)
        answer = None
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
            # other chunks (tool calls, a client's notices) are acted on from the response
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
