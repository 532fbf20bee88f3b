"""Events the client reports through its `on_event` callback, for the store, UI and CLI.

They carry counts, delays and error messages (already redacted), never credentials.
"""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.agents.llm.types import AttemptOutcome, Usage


@dataclass(frozen=True)
class AttemptEnded:
    """One HTTP attempt is over; what the store records as an LLM call."""

    attempt: int
    usage: Usage
    outcome: AttemptOutcome
    error: str | None = None


@dataclass(frozen=True)
class RetryScheduled:
    """An attempt failed and the next one starts after `delay_s` (reported before the wait)."""

    provider: str
    model: str
    failed_attempt: int
    max_attempts: int
    delay_s: float
    reason: str
    status: int | None
    server_asked: bool  # the delay is the server's Retry-After, not our backoff


@dataclass(frozen=True)
class ReaskScheduled:
    """The answer was complete but malformed; the model is asked again with the error."""

    provider: str
    model: str
    reask: int
    max_reasks: int
    error: str


LLMEvent = AttemptEnded | RetryScheduled | ReaskScheduled
