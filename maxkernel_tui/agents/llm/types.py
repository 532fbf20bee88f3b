"""The vocabulary every provider speaks: a request, the chunks of an answer, usage, the response.

Providers turn a `Request` into a stream of provider chunks (`TextDelta`, `ToolCallChunk`,
`TokenCount`, `Finish`). The client (`client.py`) stamps each chunk with its attempt number and
adds what only it knows: `UsageChunk` at the end of every attempt, `Discarded` when an attempt's
output is thrown away, and `Done` with the complete `Response`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal


class Speaker(StrEnum):
    """Who says a message (the providers' `role`; not the sub-agents' roles/role.py)."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"  # a tool call's result


class AttemptOutcome(StrEnum):
    """How one attempt at a call ended (events.AttemptEnded)."""

    OK = "ok"
    RETRY = "retry"  # discarded: the same request follows
    REASK = "reask"  # discarded: the request with the error appended follows
    FAILED = "failed"
    CANCELLED = "cancelled"


Then = Literal[AttemptOutcome.RETRY, AttemptOutcome.REASK]  # what follows a discarded attempt


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for. `signature` is an opaque token some providers
    (Gemini's thought signatures) need echoed back with the call in the next turn. `malformed`
    says why the call's arguments could not be read (not JSON, not an object); its `arguments`
    are then empty, and the tool loop answers the call with that error as its result."""

    id: str
    name: str
    arguments: dict[str, Any]
    signature: str | None = None
    malformed: str | None = None


@dataclass(frozen=True)
class Message:
    role: Speaker
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()  # assistant turns that called tools
    tool_call_id: str | None = None  # tool turns: the call this answers
    name: str | None = None  # tool turns: the function's name (Gemini matches on it)


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call; `parameters` is a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class Request:
    messages: tuple[Message, ...]
    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    json_schema: dict[str, Any] | None = None  # structured output: the answer must match it
    model: str | None = None  # None: the provider's configured model
    temperature: float | None = None
    max_tokens: int = 4096
    stream: bool = True  # False: one plain request/response, chunks produced at its end
    # What the step is about, as data (role, task folder, current kernel, ...): network providers
    # never send it; the built-in offline agent works from it instead of the prompt's prose.
    context: dict[str, Any] | None = None


@dataclass(frozen=True)
class Usage:
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None when the price table does not know the model
    latency_s: float
    estimated: bool = False  # the provider did not report counts; ours are estimates

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def total_usage(parts: list[Usage]) -> Usage:
    """The sum of several attempts of one call (retries, re-asks)."""
    first = parts[0]
    costs = [u.cost_usd for u in parts]
    return Usage(
        provider=first.provider,
        model=first.model,
        prompt_tokens=sum(u.prompt_tokens for u in parts),
        completion_tokens=sum(u.completion_tokens for u in parts),
        cost_usd=None if None in costs else sum(c for c in costs if c is not None),
        latency_s=sum(u.latency_s for u in parts),
        estimated=any(u.estimated for u in parts),
    )


@dataclass(frozen=True)
class Response:
    """A complete answer, built only from the attempt that succeeded."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: Usage  # every attempt of the call, summed
    attempts: int
    parsed: Any = None  # the structured output, parsed and validated


# Chunks a provider yields. `attempt` is 0 there; the client stamps 1, 2, ...
@dataclass(frozen=True)
class TextDelta:
    text: str
    attempt: int = 0


@dataclass(frozen=True)
class ToolCallChunk:
    call: ToolCall
    attempt: int = 0


@dataclass(frozen=True)
class TokenCount:
    """Token counts the provider reported (the latest report wins)."""

    prompt_tokens: int
    completion_tokens: int
    attempt: int = 0


@dataclass(frozen=True)
class Finish:
    reason: str  # "stop", "length", "tool_calls", "filtered" or "other:<raw>"
    attempt: int = 0


# Chunks only the client yields.
@dataclass(frozen=True)
class UsageChunk:
    usage: Usage
    attempt: int


@dataclass(frozen=True)
class Discarded:
    """Everything this attempt streamed is void (broken stream, retryable error, malformed
    output). The next attempt follows after `delay_s` seconds: a retry of the same request, or a
    re-ask with the error appended (`then`); a consumer may show it ("retrying in 7 s: HTTP
    429")."""

    reason: str
    attempt: int
    then: Then = AttemptOutcome.RETRY
    # Jittered: a replayed call discards the same output after a different wait.
    delay_s: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class Done:
    response: Response


ProviderChunk = TextDelta | ToolCallChunk | TokenCount | Finish
StreamChunk = TextDelta | ToolCallChunk | UsageChunk | Discarded | Done
