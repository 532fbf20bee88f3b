"""How far a session's loop may go (`LoopLimits`, stored with the session so that a resume runs
under the same ones), and how a step ends when it cannot go on. No jax here."""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.codec import JsonData, Shape, Unknown
from maxkernel_tui.kernels.perf.vs_xla import XlaBaseline


# Stored with a session; a limit since retired (`max_rejections`: the engineer decides how often
# to reject) is left out when read.
@dataclass(frozen=True)
class LoopLimits(JsonData, shape=Shape(unknown=Unknown.IGNORE)):
    max_iterations: int = 3
    max_debug_attempts: int = 3  # debugger fixes per failing kernel
    # a role that proposes a kernel already turned down is asked for another this many times
    max_repeats: int = 3
    patience: int = 2  # iterations without a significant improvement before Auto stops
    min_improvement: float = 0.02  # what counts as significant (relative)
    target_score: float | None = None  # stop once the best score reaches it
    tune_candidates: int = 6  # performance-model estimates per autotune
    tune_evaluations: int = 1  # harness evaluations per autotune
    # the tester proposes edge-case configurations after the first accepted kernel
    edge_cases: bool = True
    # which estimated speedup over XLA the loop ranks kernels by (perf/vs_xla.py)
    rank_by: XlaBaseline = XlaBaseline.TOLERANCE


DEFAULT_LIMITS = LoopLimits()


class NothingNew(Exception):
    """A role had no kernel to propose but ones already turned down (outside HITL, where no
    engineer is there to say what now)."""
