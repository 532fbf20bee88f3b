"""The step a request is about, read from `Request.context` (the sub-agent contract) and checked
before any work starts. No jax here: the provider checks in the caller's process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.builtin.errors import BuiltinAgentError
from maxkernel_tui.agents.roles.context import StepContext
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.targets import DEFAULT_TARGET, TARGETS
from maxkernel_tui.kernels.task import TaskError

ROLES = ("planner", "implementer", "debugger", "profiler", "explainer")
_TEXT_FIELDS = ("kernel", "plan", "question", "strategy")


def read_context(
    context: Mapping[str, Any] | None, default_target: str = DEFAULT_TARGET
) -> StepContext:
    """The request's context, checked; BuiltinAgentError says plainly what is missing or wrong
    (the built-in agent reads data, not the prompt's prose, so it cannot do without)."""
    if not context:
        raise BuiltinAgentError(
            "the built-in agent needs the request's context (role, task_dir, ...); "
            "this request has none"
        )
    role = context.get("role")
    if role not in ROLES:
        raise BuiltinAgentError(
            f"the built-in agent does not play role {role!r}; it plays {', '.join(ROLES)}"
        )
    task_dir = context.get("task_dir")
    if not isinstance(task_dir, str) or not task_dir:
        raise BuiltinAgentError("the request's context has no task_dir (the task folder)")
    try:
        load_task(Path(task_dir))
    except TaskError as error:
        raise BuiltinAgentError(f"the request's task_dir is not a usable task: {error}") from None
    target = context.get("target") or default_target
    if target not in TARGETS:
        raise BuiltinAgentError(f"unknown TPU target {target!r}; known: {', '.join(TARGETS)}")
    for name in _TEXT_FIELDS:
        if context.get(name) is not None and not isinstance(context[name], str):
            raise BuiltinAgentError(f"the request's context field {name!r} must be text")
    feedback = context.get("feedback") or []
    if not isinstance(feedback, list) or not all(isinstance(f, str) for f in feedback):
        raise BuiltinAgentError("the request's context field 'feedback' must be a list of text")
    turned_down = context.get("turned_down") or []
    if not isinstance(turned_down, list) or not all(isinstance(t, Mapping) for t in turned_down):
        raise BuiltinAgentError(
            "the request's context field 'turned_down' must be a list of mappings"
        )
    for name in ("failure", "profile"):
        if context.get(name) is not None and not isinstance(context[name], Mapping):
            raise BuiltinAgentError(f"the request's context field {name!r} must be a mapping")
    if role == Role.PROFILER and not context.get("profile"):
        raise BuiltinAgentError(
            "the profiler step needs the profile (ProfileSummary as JSON) in its context"
        )
    iteration = context.get("iteration", 1)
    return StepContext.from_request(
        {
            **context,
            "task_dir": str(Path(task_dir).resolve()),
            "target": target,
            "iteration": iteration if isinstance(iteration, int) else 1,
        }
    )
