"""The tools' names, their declarations for the models, the roles' default tools, and the check
of a call's arguments against its declaration. No jax here.

A call that names no offered tool, or whose arguments break the declaration, is answered with
the reason as its result (`CallProblem`), never raised: the model reads it and corrects itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from maxkernel_tui.agents.knowledge import TOPICS
from maxkernel_tui.agents.llm.structured import validate
from maxkernel_tui.agents.llm.types import ToolCall, ToolSpec


class ToolName(StrEnum):
    JAX_API = "jax_api"
    KNOWLEDGE = "knowledge"
    LOWER = "lower"
    CHECK = "check"
    PROFILE_SUMMARY = "profile_summary"


_SOURCE = {
    "type": "string",
    "description": (
        "a complete kernel file defining the task's entry point (computation(...), or "
        "workload(...) where the rules name it), as you would propose it"
    ),
}
_CONFIG = {
    "type": "string",
    "description": "a configuration of the task by name (see the task's configurations)",
}

SPECS: dict[ToolName, ToolSpec] = {
    ToolName.JAX_API: ToolSpec(
        ToolName.JAX_API,
        "The signature, docstring and source location of a jax, Pallas or Pallas TPU symbol in "
        "the jax installed here (the version the harness runs), e.g. 'pl.pallas_call', "
        "'pl.BlockSpec', 'pltpu.VMEM', 'pltpu.CompilerParams', 'jax.lax.dot_general'. "
        "pl = jax.experimental.pallas, pltpu = jax.experimental.pallas.tpu, jnp = jax.numpy.",
        {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "a dotted name"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
    ToolName.KNOWLEDGE: ToolSpec(
        ToolName.KNOWLEDGE,
        "One section of the team's Pallas/TPU knowledge pack: "
        + "; ".join(f"{name}: {what}" for name, what in TOPICS.items()),
        {
            "type": "object",
            "properties": {"topic": {"type": "string", "enum": list(TOPICS)}},
            "required": ["topic"],
            "additionalProperties": False,
        },
    ),
    ToolName.LOWER: ToolSpec(
        ToolName.LOWER,
        "The harness's cheap checks of a candidate kernel at one configuration, in seconds: "
        "static rules, trace (a pallas_call doing the heavy work, output shapes and dtypes), TPU "
        "lowering (block-shape rules) and, unless compile is false, the ahead-of-time TPU "
        "compile (VMEM limits, Mosaic errors), with the compiler's messages. No numerics. "
        "config defaults to the production (bench) configuration.",
        {
            "type": "object",
            "properties": {
                "source": _SOURCE,
                "config": _CONFIG,
                "compile": {"type": "boolean", "description": "also compile (default true)"},
            },
            "required": ["source"],
            "additionalProperties": False,
        },
    ),
    ToolName.CHECK: ToolSpec(
        ToolName.CHECK,
        "Numerics of a candidate kernel against the reference on one small configuration and "
        "one fresh seed, in TPU interpret mode (out-of-bounds reads raise, uninitialised memory "
        "is NaN), after the same static, trace and lowering checks at that configuration. "
        "config defaults to 'check'. Not a verdict: the harness judges the proposed kernel on "
        "more seeds and shapes.",
        {
            "type": "object",
            "properties": {"source": _SOURCE, "config": _CONFIG},
            "required": ["source"],
            "additionalProperties": False,
        },
    ),
    ToolName.PROFILE_SUMMARY: ToolSpec(
        ToolName.PROFILE_SUMMARY,
        "The current kernel's profile: the performance model's estimates per TPU generation "
        "(time, bound, share of roofline, VMEM), measured times where a TPU timed it, and the "
        "XLA reference's cost. Every figure says whether it is estimated or measured.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    ),
}

# Which role may call which tool when the settings say nothing: the ones that write kernels get
# the checks, the ones that reason about speed get the profile.
DEFAULT_ROLE_TOOLS: dict[str, tuple[ToolName, ...]] = {
    "planner": (ToolName.KNOWLEDGE, ToolName.JAX_API, ToolName.PROFILE_SUMMARY),
    "implementer": (ToolName.JAX_API, ToolName.KNOWLEDGE, ToolName.LOWER, ToolName.CHECK),
    "debugger": (ToolName.JAX_API, ToolName.KNOWLEDGE, ToolName.LOWER, ToolName.CHECK),
    "profiler": (ToolName.PROFILE_SUMMARY, ToolName.KNOWLEDGE),
    "explainer": (ToolName.KNOWLEDGE, ToolName.JAX_API, ToolName.PROFILE_SUMMARY),
    "tester": (ToolName.KNOWLEDGE,),
}
DEFAULT_MAX_TOOL_CALLS = 8  # per step: a model that keeps calling is stopped, not paid for


def tool_names(names: tuple[str, ...], where: str) -> tuple[ToolName, ...]:
    """The tools `names` names, in order; ValueError naming `where` for one that does not exist."""
    unknown = [name for name in names if name not in ToolName.__members__.values()]
    if unknown:
        known = ", ".join(ToolName)
        raise ValueError(f"{where}: unknown tool(s) {', '.join(unknown)} (known: {known})")
    return tuple(ToolName(name) for name in names)


@dataclass(frozen=True)
class CallProblem:
    """Why a call cannot be carried out; its text is the call's result."""

    text: str


def checked_arguments(
    call: ToolCall, offered: tuple[ToolName, ...]
) -> tuple[ToolName, Mapping[str, Any]] | CallProblem:
    """(the tool, its arguments) of a well-formed call to an offered tool, or the problem."""
    if call.malformed is not None:
        return CallProblem(f"error: malformed call: {call.malformed}. Call it again with JSON.")
    if call.name not in offered:
        names = ", ".join(offered) or "none"
        return CallProblem(f"error: no tool named {call.name!r} here; the tools are: {names}")
    tool = ToolName(call.name)
    try:
        validate(call.arguments, SPECS[tool].parameters)
    except ValueError as error:
        return CallProblem(f"error: the arguments of {tool} do not match its declaration: {error}")
    return tool, call.arguments
