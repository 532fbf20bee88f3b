"""Who does a step of a session (`Role`): the vocabulary of the events' `role` fields, the
gates' proposals and the panes. Plain data; no jax."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """The sub-agents that are asked a model, the autotuner, which is not, and the engine itself
    (its own notes and errors, which no sub-agent wrote)."""

    PLANNER = "planner"
    IMPLEMENTER = "implementer"
    DEBUGGER = "debugger"
    PROFILER = "profiler"
    EXPLAINER = "explainer"
    TESTER = "tester"
    AUTOTUNER = "autotuner"
    ENGINE = "engine"
