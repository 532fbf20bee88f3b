"""What a sub-agent's step knows (`StepContext`), one type on both sides of a model request: the
engine builds it, each role's prompt shows the parts that role needs, and the data part travels
with the request (`Request.context`) to providers that read data rather than prose (the built-in
agent), which reads it back with `from_request`. No jax here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.codec import JsonData, Shape, Unknown
from maxkernel_tui.kernels.report.reasons import Reason


@dataclass(frozen=True)
class Failure(JsonData, shape=Shape(omit_none=True, unknown=Unknown.IGNORE)):
    """The check that rejected a kernel, and why: in words (for a model's prompt) and as the
    check's code (for an agent that reads data)."""

    check: str
    detail: str
    reason: Reason | None = None  # None: not a check's failure (a repeated proposal)

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"


# How the engineer's own words are quoted in a step's feedback: a rejection's reason and a chat
# message (`engineer_words` reads them back for providers that read data, not prose).
REJECTED = "'s proposal was rejected: "
# How an agent with no other proposal says so, first in its answer (the engine then asks the
# engineer instead of asking the agent again).
NOTHING_ELSE = "Nothing else to offer:"
MESSAGE = "the engineer's message: "


def rejection_feedback(role: Role, reason: str) -> str:
    return f"{role}{REJECTED}{reason}"


def message_feedback(text: str) -> str:
    return f"{MESSAGE}{text}"


def engineer_words(feedback: tuple[str, ...]) -> list[str]:
    """What the engineer wrote in `feedback` (rejection reasons and messages), oldest first."""
    words = []
    for line in feedback:
        if line.startswith(MESSAGE):
            words.append(line[len(MESSAGE) :])
        elif REJECTED in line:
            words.append(line.split(REJECTED, 1)[1])
    return words


@dataclass(frozen=True)
class TurnedDown(JsonData, shape=Shape(unknown=Unknown.IGNORE)):
    """A proposal of this step that was turned down (by the engineer, or as a repeat of a kernel
    turned down before), and why."""

    content: str
    reason: str


@dataclass(frozen=True)
class StepContext:
    """What a step knows. Each role's message shows only the parts it needs."""

    task_dir: str  # absolute
    target: str
    task_id: str = ""
    entry_point: str = "computation"  # the function a kernel defines (JAXBench's: `workload`)
    iteration: int = 1
    task_facts: str = ""  # description, shapes per configuration, reference source
    role: Role | None = None  # set by the request that carries the context
    kernel: str | None = None
    plan: str | None = None
    feedback: tuple[str, ...] = ()  # rejections and chat messages, oldest first
    failure: Failure | None = None
    evaluation: str | None = None  # the latest evaluation, as text
    profile: dict[str, Any] | None = None  # ProfileSummary.to_json()
    profile_text: str | None = None
    diagnosis: str | None = None
    question: str | None = None
    strategy: str | None = None  # the graph search's strategy for this expansion, by name
    previous_attempts: tuple[str, ...] = field(default=())  # earlier failed fixes (debugger)
    turned_down: tuple[TurnedDown, ...] = ()  # this step's proposals turned down, oldest first
    # Parameters whose gradients the task judges (a training task); empty: forward only.
    gradients: tuple[str, ...] = ()

    def to_request(self, role: Role) -> dict[str, Any]:
        """The data that travels with `role`'s request (the prose parts stay in the prompt)."""
        return {
            "role": role,
            "task_dir": self.task_dir,
            "target": self.target,
            "iteration": self.iteration,
            "kernel": self.kernel,
            "plan": self.plan,
            "feedback": list(self.feedback),
            "failure": None if self.failure is None else self.failure.to_json(),
            "profile": self.profile,
            "question": self.question,
            "strategy": self.strategy,
            "turned_down": [t.to_json() for t in self.turned_down],
            "gradients": list(self.gradients),
        }

    @classmethod
    def from_request(cls, data: Mapping[str, Any]) -> StepContext:
        """The context `to_request` wrote; the caller has checked the fields' types."""
        failure = data.get("failure")
        profile = data.get("profile")
        return cls(
            task_dir=str(data["task_dir"]),
            target=str(data["target"]),
            iteration=int(data.get("iteration") or 1),
            role=Role(data["role"]) if data.get("role") else None,
            kernel=data.get("kernel"),
            plan=data.get("plan"),
            feedback=tuple(data.get("feedback") or ()),
            failure=None if failure is None else Failure.from_json(failure),
            profile=None if profile is None else dict(profile),
            question=data.get("question"),
            strategy=data.get("strategy"),
            turned_down=tuple(TurnedDown.from_json(t) for t in data.get("turned_down") or ()),
            gradients=tuple(str(name) for name in data.get("gradients") or ()),
        )
