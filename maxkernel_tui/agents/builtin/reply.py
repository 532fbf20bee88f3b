"""What the built-in agent's worker answers for one step, as it crosses from the worker process
(worker.py) to the provider (provider.py): one JSON object per line; and the one request that
is not a step. No jax here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# The role of a request that drafts for a task and answers empty text: the provider sends it
# while the session describes the task, so the first step finds the drafts made.
DRAFT_AHEAD = "draft_ahead"


class Failure(StrEnum):
    """Why the worker has no answer."""

    CANNOT_PLAN = "cannot_plan"  # the agent has no plan for the task (CannotPlan)
    NO_ANSWER = "no_answer"  # the step asks what the agent cannot give (BuiltinAgentError)
    INTERNAL = "internal"  # anything else went wrong


@dataclass(frozen=True)
class WorkerReply:
    """The answer's text, or the error and its kind."""

    text: str | None = None
    error: str = ""
    failure: Failure | None = None

    def to_json(self) -> dict[str, Any]:
        if self.text is not None:
            return {"text": self.text}
        return {"error": self.error, "kind": self.failure}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerReply:
        kind = data.get("kind")
        return cls(
            data.get("text"),
            str(data.get("error", "")),
            Failure(kind) if kind in tuple(Failure) else None,
        )
