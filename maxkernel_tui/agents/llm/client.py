"""Model calls made safe to build on: budget first, then timeout, retries and re-asks.

`LLMClient.stream(request)` yields the live chunks of every attempt, each stamped with its
attempt number (1, 2, ...), and ends with `Done(response)`; `complete(request)` returns that
response only.

Broken streams are retried from scratch, never half-applied. An attempt that fails after it
started streaming (connection cut, truncated event, no finish marker, timeout) is followed by
`UsageChunk` and `Discarded(reason, attempt, then, delay_s)`: everything that attempt streamed is
void, a consumer that showed it should clear it, and it may say that a retry (or a re-ask)
follows after `delay_s`. The `Response` in `Done` is built from the successful
attempt alone, so tool calls and structured output are acted on from it, never from chunks.
Retries happen on 429, 408, 5xx, connection errors, broken streams and timeouts, at most
`RetryPolicy.max_attempts` HTTP attempts per ask, with exponential backoff and jitter or the
server's Retry-After; each is announced by a `RetryScheduled` event before the wait. When they
run out the call raises `RetriesExhausted` naming the attempts and the last error.

Malformed output (structured output that does not parse or validate, Gemini's
MALFORMED_FUNCTION_CALL) is re-asked with the error appended to the conversation, at most
`RetryPolicy.max_reasks` times (`ReaskScheduled`), then raised as `MalformedOutput`. A tool call
whose arguments are not JSON is not malformed output: it reaches the caller marked
(`ToolCall.malformed`), and the tool loop answers it with the error.

Every attempt ends with a `Usage` (an `AttemptEnded` event and a `UsageChunk`, which comes before
the exception of a failed call too) and is charged to the budget; before each attempt is sent its
worst case is reserved, and `BudgetExceeded` is raised instead of sending a call that could pass
a cap. `on_event` receives every attempt's end, cancelled ones included (a stream cannot yield
after its consumer closed it), and each retry and re-ask as it is scheduled. Cancelling the
consuming task, or closing the stream, closes the HTTP stream and charges what the attempt may
have used.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from maxkernel_tui.agents.budget import Budget, estimate_tokens
from maxkernel_tui.agents.llm.errors import (
    LLMError,
    MalformedOutput,
    ProviderError,
    RetriesExhausted,
    StreamBroken,
)
from maxkernel_tui.agents.llm.events import (
    AttemptEnded,
    LLMEvent,
    ReaskScheduled,
    RetryScheduled,
)
from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.llm.retry import RetryPolicy
from maxkernel_tui.agents.llm.structured import json_parser, reask_messages
from maxkernel_tui.agents.llm.types import (
    AttemptOutcome,
    Discarded,
    Done,
    Finish,
    Request,
    Response,
    StreamChunk,
    TextDelta,
    Then,
    TokenCount,
    ToolCall,
    ToolCallChunk,
    Usage,
    UsageChunk,
    total_usage,
)

Parser = Callable[[str], Any]  # raises ValueError on an unusable answer


def prompt_chars(request: Request) -> int:
    """Every character the provider will read: system, turns, tool declarations, schema."""
    chars = len(request.system) + len(json.dumps([asdict(t) for t in request.tools]))
    chars += len(json.dumps(request.json_schema)) if request.json_schema else 0
    for m in request.messages:
        chars += len(m.content) + sum(
            len(c.name) + len(json.dumps(c.arguments)) for c in m.tool_calls
        )
    return chars


@dataclass
class _Attempt:
    """What one attempt produced so far."""

    text: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens: TokenCount | None = None
    finish: str | None = None
    started: bool = False  # the provider answered; the prompt was (probably) billed
    error: ProviderError | MalformedOutput | None = None
    usage: Usage | None = None  # set when the attempt is over


@dataclass
class _Call:
    """One ask across its attempts: the request as it is now (re-asks append to it), the usage
    of every attempt so far, and the counts that bound retries and re-asks."""

    request: Request
    model: str
    usages: list[Usage] = field(default_factory=list)
    attempt: int = 0
    retries: int = 0  # since the last re-ask
    reasks: int = 0


class LLMClient:
    def __init__(
        self,
        provider: Provider,
        *,
        budget: Budget | None = None,
        policy: RetryPolicy | None = None,
        on_event: Callable[[LLMEvent], None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.provider = provider
        self.budget = budget or Budget()
        self.policy = policy or RetryPolicy()
        self._on_event = on_event
        self._sleep, self._clock, self._rng = sleep, clock, rng or random.Random()

    async def complete(
        self, request: Request, *, parse: Parser | None = None, budget: Budget | None = None
    ) -> Response:
        async with aclosing(self.stream(request, parse=parse, budget=budget)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, Done):
                    return chunk.response
        raise AssertionError("a stream always ends with Done or an exception")

    async def stream(
        self, request: Request, *, parse: Parser | None = None, budget: Budget | None = None
    ) -> AsyncGenerator[StreamChunk, None]:
        """The chunks of one call; `budget` overrides the client's (a search's scope)."""
        budget = budget or self.budget
        model = request.model or self.provider.model
        call = _Call(replace(request, model=model), model)
        if parse is None and request.json_schema is not None:
            parse = json_parser(request.json_schema)
        while True:
            call.attempt += 1
            result = _Attempt()
            async with aclosing(self._metered(call, result, budget)) as chunks:
                async for chunk in chunks:
                    yield chunk
            parsed = self._parse(result, parse)
            usage = result.usage
            assert usage is not None  # _metered settles every attempt that ends normally
            call.usages.append(usage)
            failure, delay = self._after(call, result.error, usage)
            yield UsageChunk(usage, call.attempt)  # every attempt ends with its usage, failed too
            if failure is not None:
                raise failure
            if result.error is None:
                text = "".join(result.text)
                finish = result.finish or "stop"
                total = total_usage(call.usages)
                yield Done(
                    Response(text, tuple(result.tool_calls), finish, total, call.attempt, parsed)
                )
                return
            then: Then = (
                AttemptOutcome.REASK
                if isinstance(result.error, MalformedOutput)
                else AttemptOutcome.RETRY
            )
            yield Discarded(str(result.error), call.attempt, then, delay)
            if delay > 0:
                await self._sleep(delay)

    async def _metered(
        self, call: _Call, result: _Attempt, budget: Budget
    ) -> AsyncGenerator[StreamChunk, None]:
        """One attempt's chunks: its worst case reserved before it is sent, its usage settled
        after (into `result.usage`), also when it is cancelled, closed or fails."""
        request = call.request
        reservation = budget.reserve(
            call.model, estimate_tokens(prompt_chars(request)), request.max_tokens
        )
        started = self._clock()
        try:
            async with aclosing(self._attempt(request, call.attempt, result)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except (ProviderError, MalformedOutput) as e:
            result.error = e
        except BaseException as e:  # cancelled, closed by the consumer, or not the provider's fault
            usage = self._usage(request, result, started, budget)
            reservation.settle(usage.prompt_tokens, usage.completion_tokens, usage.cost_usd)
            stopped = isinstance(e, (asyncio.CancelledError, GeneratorExit))
            outcome = AttemptOutcome.CANCELLED if stopped else AttemptOutcome.FAILED
            self._emit(
                AttemptEnded(
                    call.attempt, usage, outcome, None if stopped else f"{type(e).__name__}: {e}"
                )
            )
            raise
        result.usage = self._usage(request, result, started, budget)
        reservation.settle(
            result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cost_usd
        )

    @staticmethod
    def _parse(result: _Attempt, parse: Parser | None) -> Any:
        """The parsed answer of a sound attempt (None without a parser or with tool calls); an
        answer the parser refuses becomes the attempt's `MalformedOutput`."""
        if result.error is not None or parse is None or result.tool_calls:
            return None
        raw = "".join(result.text)
        try:
            return parse(raw)
        except ValueError as e:
            result.error = MalformedOutput(str(e), raw)
            return None

    def _after(
        self, call: _Call, error: ProviderError | MalformedOutput | None, usage: Usage
    ) -> tuple[LLMError | None, float]:
        """What follows an attempt, announced: (None, 0) done or re-ask at once, (None, delay)
        retry after the delay, or (the error to raise, 0)."""
        if error is None:
            self._emit(AttemptEnded(call.attempt, usage, AttemptOutcome.OK))
            return None, 0.0
        if isinstance(error, MalformedOutput):
            return self._reask_or_fail(call, error, usage), 0.0
        failure, delay = self._retry_or_fail(error, call.retries, call.model, call.attempt, usage)
        call.retries += 1
        return failure, delay

    def _reask_or_fail(
        self, call: _Call, error: MalformedOutput, usage: Usage
    ) -> MalformedOutput | None:
        """None with the error appended to `call.request` for the re-ask, or the error to raise
        once the re-asks are spent."""
        if call.reasks >= self.policy.max_reasks:
            self._emit(AttemptEnded(call.attempt, usage, AttemptOutcome.FAILED, str(error)))
            return MalformedOutput(
                f"{error} (still malformed after {call.reasks} re-asks)", error.raw
            )
        call.reasks, call.retries = call.reasks + 1, 0
        self._emit(AttemptEnded(call.attempt, usage, AttemptOutcome.REASK, str(error)))
        self._emit(
            ReaskScheduled(
                self.provider.name, call.model, call.reasks, self.policy.max_reasks, str(error)
            )
        )
        messages = call.request.messages + reask_messages(error.raw, str(error))
        call.request = replace(call.request, messages=messages)
        return None

    def _retry_or_fail(
        self, error: ProviderError, retries: int, model: str, attempt: int, usage: Usage
    ) -> tuple[ProviderError | None, float]:
        """(None, the wait before the next attempt, announced) or (the error to raise, 0)."""
        policy = self.policy
        delay = None
        if error.retryable and retries + 1 < policy.max_attempts:
            delay = policy.delay_s(retries + 1, error.retry_after_s, self._rng)
        if delay is None:
            self._emit(AttemptEnded(attempt, usage, AttemptOutcome.FAILED, str(error)))
            if not error.retryable:
                return error, 0.0
            why = (
                f"the server asked to wait {error.retry_after_s:.0f} s, more than the "
                f"{policy.max_wait_s:.0f} s allowed"
                if retries + 1 < policy.max_attempts
                else f"gave up after {retries + 1} attempts"
            )
            exhausted = RetriesExhausted(
                f"{self.provider.name} {model}: {why}; last error: {error}", error
            )
            exhausted.__cause__ = error
            return exhausted, 0.0
        self._emit(AttemptEnded(attempt, usage, AttemptOutcome.RETRY, str(error)))
        self._emit(
            RetryScheduled(
                self.provider.name,
                model,
                attempt,
                policy.max_attempts,
                delay,
                str(error),
                error.status,
                error.retry_after_s is not None,
            )
        )
        return None, delay

    async def _attempt(
        self, request: Request, attempt: int, result: _Attempt
    ) -> AsyncGenerator[StreamChunk, None]:
        """One provider attempt under the per-attempt timeout; fills `result` as it goes."""
        timeout = self.policy.timeout_s
        deadline = asyncio.get_running_loop().time() + timeout
        async with aclosing(self.provider.stream(request)) as chunks:
            while True:
                try:
                    # The timeout covers only the wait for the provider, never our consumer.
                    async with asyncio.timeout_at(deadline):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise ProviderError(
                        f"no complete answer within {timeout:g} s", retryable=True
                    ) from None
                result.started = True
                if isinstance(chunk, TextDelta):
                    result.text.append(chunk.text)
                    yield replace(chunk, attempt=attempt)
                elif isinstance(chunk, ToolCallChunk):
                    result.tool_calls.append(chunk.call)
                    yield replace(chunk, attempt=attempt)
                elif isinstance(chunk, TokenCount):
                    result.tokens = chunk
                elif isinstance(chunk, Finish):
                    result.finish = chunk.reason
        if result.finish is None:
            raise StreamBroken("the answer ended before the model finished")

    def _usage(self, request: Request, result: _Attempt, started: float, budget: Budget) -> Usage:
        assert request.model is not None
        if result.tokens is not None:
            prompt, completion, estimated = (
                result.tokens.prompt_tokens,
                result.tokens.completion_tokens,
                False,
            )
        elif result.started:
            out_chars = sum(map(len, result.text)) + sum(
                len(json.dumps(c.arguments)) for c in result.tool_calls
            )
            prompt, completion, estimated = (
                estimate_tokens(prompt_chars(request)),
                estimate_tokens(out_chars),
                True,
            )
        else:
            prompt, completion, estimated = 0, 0, False
        cost = (
            budget.prices.cost(request.model, prompt, completion) if prompt or completion else 0.0
        )
        return Usage(
            self.provider.name,
            request.model,
            prompt,
            completion,
            cost,
            self._clock() - started,
            estimated,
        )

    def _emit(self, event: LLMEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)
