"""The operand precision of a generated kernel's matmuls, as data: the vocabulary, a choice per
matmul with its reason, and the XLA precision it is compared at. No jax here (precision.py
makes the choice in the agent's worker; the renderer and the answers read it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from maxkernel_tui.kernels.perf.xla_model import XLA_DEFAULT, XLA_HIGH, XLA_HIGHEST, XlaPrecision


class OperandPrecision(StrEnum):
    """A matmul's operands in a generated kernel (the `operands` of its piece)."""

    BF16 = "bf16"  # rounded to bf16, f32 accumulation (one MXU pass)
    F32 = "f32"  # f32 at Mosaic's default precision (several passes)
    HIGHEST = "highest"  # f32 at Precision.HIGHEST


_NAMES: dict[OperandPrecision, str] = {
    OperandPrecision.BF16: "bf16",
    OperandPrecision.F32: "f32 at Mosaic's default",
    OperandPrecision.HIGHEST: "f32 at HIGHEST",
}


# The most of the task's tolerance bf16 operands may be projected to use at production shapes: a
# margin for the projection's spread (the worst element of a seed varies by about 10%).
PROJECTED_SHARE_LIMIT = 0.9


@dataclass(frozen=True)
class Depth:
    """Where a matmul's rounding error was seen and where the kernel will run: its contraction
    depth (K) and the outputs' element count, at a numerics configuration and at production."""

    observed_k: int
    production_k: int
    observed_elements: int
    production_elements: int

    def growth(self) -> float:
        """How much the worst rounding error of bf16 operands grows from the observed shapes to
        production. Each product's rounding error is independent and of either sign, so a dot's
        error grows like sqrt(K); the worst of N roughly normal errors grows like
        sqrt(ln N). Never below 1: smaller production shapes are not projected down."""
        depth = math.sqrt(max(self.production_k, 1) / max(self.observed_k, 1))
        spread = math.sqrt(
            math.log(max(self.production_elements, 3)) / math.log(max(self.observed_elements, 3))
        )
        return max(depth, 1.0) * max(spread, 1.0)


def projected_share(observed_share: float, depth: Depth) -> float:
    """The share of the tolerance (|Δ| / (atol + rtol·|reference|), compare.py) the worst element
    is projected to use at production, from the share seen at a numerics configuration. The
    tolerance is held at its observed size: where the reference grows with K too, its rtol part
    grows and this errs on the side of f32."""
    return observed_share * depth.growth()


@dataclass(frozen=True)
class PrecisionChoice:
    """One precision per matmul of the program (in program order), and why."""

    per_matmul: tuple[OperandPrecision, ...]
    why: str

    @property
    def xla(self) -> XlaPrecision:
        """The precision XLA's reference is compared at: the most any matmul needed."""
        if OperandPrecision.HIGHEST in self.per_matmul:
            return XLA_HIGHEST
        return XLA_HIGH if OperandPrecision.F32 in self.per_matmul else XLA_DEFAULT


def operand_words(choice: Sequence[OperandPrecision]) -> str:
    return ", ".join(_NAMES[p] for p in choice)
