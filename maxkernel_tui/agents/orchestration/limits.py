"""How far a session's loop may go (`LoopLimits`, stored with the session so that a resume runs
under the same ones), and how a step ends when it cannot go on. No jax here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoopLimits:
    max_iterations: int = 3
    max_debug_attempts: int = 3  # debugger fixes per failing kernel
    max_rejections: int = 5  # re-proposals of one step before it is given up
    # a role that proposes a kernel already turned down is asked for another this many times
    max_repeats: int = 3
    patience: int = 2  # iterations without a significant improvement before Auto stops
    min_improvement: float = 0.02  # what counts as significant (relative)
    target_score: float | None = None  # stop once the best score reaches it
    tune_candidates: int = 6  # performance-model estimates per autotune
    tune_evaluations: int = 1  # harness evaluations per autotune
    # the tester proposes edge-case configurations after the first accepted kernel
    edge_cases: bool = True

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


DEFAULT_LIMITS = LoopLimits()


class StepGivenUp(Exception):
    """A step's proposals were rejected more often than the limits allow."""


class NothingNew(StepGivenUp):
    """A role had no kernel to propose but ones already turned down."""
