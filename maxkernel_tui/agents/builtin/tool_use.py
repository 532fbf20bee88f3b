"""The built-in agent's use of tools, read from the request alone: its debugger, offered `lower`,
lowers its fix before proposing it and, when the fix does not lower, moves on to its next
kernel (at most `MAX_LOWERS` lowerings per step). No jax here: the provider calls it."""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.agents.llm.types import Request, Speaker
from maxkernel_tui.agents.roles.role import Role

LOWER = "lower"
MAX_LOWERS = 2
PASSED = "passed:"  # how agents.tools.runner ends a probe that passed, and one that failed
FAILED = "failed at "


@dataclass(frozen=True)
class Lowered:
    """One `lower` call of this step and what it said."""

    source: str
    result: str

    @property
    def passed(self) -> bool:
        return PASSED in self.result

    @property
    def failed(self) -> bool:
        return FAILED in self.result


def lowers_first(role: Role, request: Request) -> bool:
    """The step is the debugger's and `lower` is offered: it lowers before proposing."""
    return role == Role.DEBUGGER and any(tool.name == LOWER for tool in request.tools)


def lowered_so_far(request: Request) -> list[Lowered]:
    """This step's `lower` calls with their results, in order (from the conversation)."""
    results = {m.tool_call_id: m.content for m in request.messages if m.role == Speaker.TOOL}
    return [
        Lowered(str(call.arguments.get("source", "")), results[call.id])
        for message in request.messages
        for call in message.tool_calls
        if call.name == LOWER and call.id in results
    ]


def note(lowered: list[Lowered]) -> str:
    """The sentence the answer starts with: what lowering found before it was proposed."""
    if not lowered:
        return ""
    failed = sum(item.failed for item in lowered)
    last = "it lowers and compiles" if lowered[-1].passed else "not confirmed"
    skipped = f"{failed} kernel(s) that did not lower were skipped; " if failed else ""
    return f"Lowered for TPU before proposing ({skipped}this one: {last}).\n\n"
