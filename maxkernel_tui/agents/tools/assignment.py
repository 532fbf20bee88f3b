"""Who asks which model and may call which tools: one `RoleAssignment` per sub-agent, made from
the settings' `[roles.*]` tables over the defaults (specs.DEFAULT_ROLE_TOOLS). Data, not code:
the engine reads it per step. No jax here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.agents.tools.specs import (
    DEFAULT_MAX_TOOL_CALLS,
    DEFAULT_ROLE_TOOLS,
    ToolName,
    tool_names,
)
from maxkernel_tui.codec import encode_object
from maxkernel_tui.config import ConfigError, Settings
from maxkernel_tui.config_roles import ROLE_NAMES


@dataclass(frozen=True)
class RoleAssignment:
    model: str | None  # None: the session's model
    tools: tuple[ToolName, ...]
    max_tool_calls: int


@dataclass(frozen=True)
class RolePlan:
    """Every role's assignment; a role it does not name gets the defaults."""

    roles: Mapping[str, RoleAssignment] = field(default_factory=dict)

    def of(self, role: Role) -> RoleAssignment:
        default = RoleAssignment(None, DEFAULT_ROLE_TOOLS.get(role, ()), DEFAULT_MAX_TOOL_CALLS)
        return self.roles.get(role, default)

    def models(self) -> dict[str, str]:
        """The roles with a model of their own."""
        return {role: a.model for role, a in self.roles.items() if a.model}

    def to_json(self) -> dict[str, Any]:
        return {role: encode_object(a) for role, a in self.roles.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RolePlan:
        """A plan `to_json` wrote (a resumed session's, from its start event)."""
        return cls(
            {
                role: RoleAssignment(
                    entry.get("model"),
                    tool_names(tuple(entry.get("tools", ())), f"stored role {role}"),
                    int(entry.get("max_tool_calls", DEFAULT_MAX_TOOL_CALLS)),
                )
                for role, entry in data.items()
            }
        )


def role_plan(settings: Settings) -> RolePlan:
    """The plan of `settings`: each role's own table over its defaults. An unknown tool name is
    a ConfigError naming the table."""
    plan: dict[str, RoleAssignment] = {}
    for role in ROLE_NAMES:
        own = settings.roles.get(role)
        if own is None:
            continue
        try:
            tools = (
                DEFAULT_ROLE_TOOLS.get(role, ())
                if own.tools is None
                else tool_names(own.tools, f"[roles.{role}] tools")
            )
        except ValueError as error:
            raise ConfigError(f"{settings.config_file}: {error}") from None
        calls = DEFAULT_MAX_TOOL_CALLS if own.max_tool_calls is None else own.max_tool_calls
        plan[role] = RoleAssignment(own.model, tools, calls)
    return RolePlan(plan)
