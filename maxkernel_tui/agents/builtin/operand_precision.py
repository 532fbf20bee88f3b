"""The operand precision of a generated kernel's matmuls, as data: the vocabulary, a choice per
matmul with its reason, and the XLA precision it is compared at. No jax here (precision.py
makes the choice in the agent's worker; the renderer and the answers read it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from maxkernel_tui.kernels.perf.xla_model import XLA_DEFAULT, XLA_HIGH, XLA_HIGHEST, XlaPrecision


class OperandPrecision(StrEnum):
    """A matmul's operands in a generated kernel (the `operands` of its piece)."""

    BF16 = "bf16"  # rounded to bf16, f32 accumulation (one MXU pass)
    # each f32 operand split into bf16 high and low parts, three products (three passes, close
    # to f32); f32 operands at Mosaic's default precision would take one bf16 pass
    BF16X3 = "bf16x3"
    HIGHEST = "highest"  # f32 at Precision.HIGHEST (six passes)


_NAMES: dict[OperandPrecision, str] = {
    OperandPrecision.BF16: "bf16",
    OperandPrecision.BF16X3: "f32 as three bf16 passes",
    OperandPrecision.HIGHEST: "f32 at HIGHEST",
}


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
        return XLA_HIGH if OperandPrecision.BF16X3 in self.per_matmul else XLA_DEFAULT


def operand_words(choice: Sequence[OperandPrecision]) -> str:
    return ", ".join(_NAMES[p] for p in choice)
