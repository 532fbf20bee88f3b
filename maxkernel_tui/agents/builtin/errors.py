"""What the built-in agent says when it cannot help: plain reasons, never retried. No jax here."""

from maxkernel_tui.agents.llm.errors import ProviderError

CANNOT_PLAN_PREFIX = "the built-in agent cannot plan this task: "


class CannotPlan(Exception):
    """The built-in agent cannot plan a kernel for this computation; the message says why."""


class BuiltinAgentError(ProviderError):
    """The built-in provider cannot answer this request (no or invalid context, no other kernel
    to offer); asking again would give the same answer, so it is not retryable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class CannotPlanError(BuiltinAgentError):
    """The task is outside what the built-in agent can plan; the message starts with
    CANNOT_PLAN_PREFIX and gives the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(CANNOT_PLAN_PREFIX + reason)
