"""What the built-in agent's worker answers for one step, as it crosses from the worker process
(worker.py) to the provider (provider.py): one JSON object per line; and the one request that
is not a step. No jax here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from maxkernel_tui.codec import JsonData, Shape, Unknown

# The role of a request that drafts for a task and answers empty text: the provider sends it
# while the session describes the task, so the first step finds the drafts made.
DRAFT_AHEAD = "draft_ahead"


class Failure(StrEnum):
    """Why the worker has no answer."""

    CANNOT_PLAN = "cannot_plan"  # the agent has no plan for the task (CannotPlan)
    NO_ANSWER = "no_answer"  # the step asks what the agent cannot give (BuiltinAgentError)
    INTERNAL = "internal"  # anything else went wrong


# {"text": ...}, or {"error": ..., "kind": ...}
_REPLY = Shape(alone="text", keys={"failure": "kind"}, unknown=Unknown.IGNORE)


@dataclass(frozen=True)
class WorkerReply(JsonData, shape=_REPLY):
    """The answer's text, or the error and its kind."""

    text: str | None = None
    error: str = ""
    failure: Failure | None = None
