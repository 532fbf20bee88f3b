"""`[roles.<role>]` in the config file: a model, the tools and the tool calls per step of each
sub-agent. Stdlib only; no jax, no Textual (config.py reads it).

    [roles.implementer]
    model = "gemini-3.1-pro"
    tools = ["jax_api", "knowledge", "lower", "check"]
    max_tool_calls = 8

Tool names are checked against the tools that exist where the tools are known (agents/tools).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The sub-agents that ask a model (agents.roles.prompts.Role, and the porter): what `[roles.*]`
# may name. Kept here so that settings import nothing.
ROLE_NAMES = ("planner", "implementer", "debugger", "profiler", "explainer", "tester", "porter")
_KEYS = frozenset({"model", "tools", "max_tool_calls"})


@dataclass(frozen=True)
class RoleSettings:
    """One role's table: the model it asks (None: the session's), the tools it may call (None:
    its defaults; () none), and how many tool calls one of its steps may make (None: the
    default)."""

    model: str | None = None
    tools: tuple[str, ...] | None = None
    max_tool_calls: int | None = None


def parse_roles(value: Any) -> dict[str, RoleSettings]:
    """{role: RoleSettings} from the file's `[roles.*]` tables; ValueError names what is wrong."""
    if not isinstance(value, Mapping):
        raise ValueError('expected tables of roles, e.g. [roles.implementer] model = "..."')
    return {role: _role(role, entry) for role, entry in value.items()}


def _role(role: str, entry: Any) -> RoleSettings:
    if role not in ROLE_NAMES:
        raise ValueError(f"unknown role {role!r} (known: {', '.join(ROLE_NAMES)})")
    if not isinstance(entry, Mapping) or set(entry) - _KEYS:
        raise ValueError(f"roles.{role}: expected only {', '.join(sorted(_KEYS))}")
    model, tools, calls = entry.get("model"), entry.get("tools"), entry.get("max_tool_calls")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ValueError(f"roles.{role}.model: expected a model name")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
    ):
        raise ValueError(f"roles.{role}.tools: expected a list of tool names")
    if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int) or calls < 0):
        raise ValueError(f"roles.{role}.max_tool_calls: expected a whole number, 0 or more")
    return RoleSettings(
        None if model is None else model.strip(), None if tools is None else tuple(tools), calls
    )


def role_words(role: str, own: RoleSettings) -> str:
    """One role's settings as `config` shows them."""
    parts = [f"model {own.model}"] if own.model else []
    if own.tools is not None:
        parts.append(f"tools {', '.join(own.tools) or 'none'}")
    if own.max_tool_calls is not None:
        parts.append(f"{own.max_tool_calls} tool calls per step")
    return f"{role}: {', '.join(parts) or 'defaults'}"
