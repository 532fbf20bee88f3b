"""The knowledge pack as tests read it: the roles and families its selections serve, the prompt
budget, and its fenced examples and quoted errors."""

from __future__ import annotations

import re

from maxkernel_tui.agents import knowledge

ROLES = ("planner", "implementer", "debugger", "profiler", "autotuner", "explainer", "tester")
FAMILIES = (
    "attention",
    "gemm",
    "kb-gemm",
    "kb-conv",
    "loss",
    "moe",
    "norm",
    "ssm",
    "triangle",
    knowledge.TRAINING_FAMILY,
)
MAX_PROMPT_BYTES = 40_000  # a role's knowledge must leave room for the task, kernel and reply
# A fence's info string: "python" (a fragment), "python example NAME" (a complete kernel file),
# "text error ID" (a quoted error message).
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def fences(kind: str) -> list[tuple[str, str, str]]:
    """(topic, info string, body) of every fence in the pack whose info starts with `kind`."""
    found = []
    for name in knowledge.TOPICS:
        for match in FENCE.finditer(knowledge.topic(name)):
            if match.group(1).split()[:1] == [kind]:
                found.append((name, match.group(1), match.group(2)))
    return found


def examples() -> dict[str, str]:
    return {
        info.split()[2]: body
        for _, info, body in fences("python")
        if info.split()[1:2] == ["example"]
    }


def quoted_errors() -> dict[str, str]:
    return {
        info.split()[2]: body.strip()
        for _, info, body in fences("text")
        if info.split()[1:2] == ["error"]
    }
