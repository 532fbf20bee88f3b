"""The kinds of stage a plan is made of, one class each: a matmul (batched or not), a
convolution, a row-wise stage (element-wise and row reductions) and a column-reduction stage.

Each kind knows what the planner asks of it (what heads it, whether it reduces over rows, its
operands) and how the plan describes it. Its kernel is its family's piece (pieces/matmul.py,
rowwise.py, conv.py), which render.py calls with the stage's parameters. No jax here beyond the
planner's own values (program.py imports it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

import numpy as np

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.image_reductions import spans_every_channel
from maxkernel_tui.agents.builtin.layout import GROUP_ROW, ROW_GROUP, SCALAR, Frame, Kind
from maxkernel_tui.agents.builtin.primitives import REDUCTIONS, picks_one_per_row
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Var


@dataclass(frozen=True)
class Matmul:
    eqn: Eqn
    lhs: Var
    rhs: Var
    rhs_transposed: bool  # weight stored (cols, depth): contract over its last axis
    depth: Dim
    precision: str | None  # "HIGHEST" when the reference asks for it

    @property
    def result(self) -> Var:
        return self.eqn.outputs[0]


@dataclass(frozen=True)
class Conv:
    """A plain convolution (primitives.is_plain_conv): the image (batch, channels, height, width)
    and the kernel (out channels, channels, kh, kw); its result is the stage's tile."""

    eqn: Eqn
    image: Var
    kernel: Var

    @property
    def result(self) -> Var:
        return self.eqn.outputs[0]

    @property
    def lhs(self) -> Var:
        """The image: the convolution's left operand, as a matmul's `lhs` (its dtype)."""
        return self.image

    @property
    def rhs(self) -> Var:
        """The kernel: the convolution's right operand, as a matmul's `rhs` (its dtype)."""
        return self.kernel

    @property
    def precision(self) -> str | None:
        """ "HIGHEST" when the reference asks for it, as `Matmul.precision`."""
        return asked_precision(self.eqn)


class OperandRole(StrEnum):
    """How a stage's piece takes an operand or gives a result: the head's operands (a matmul's
    lhs and rhs, transposed or not; a convolution's image and taps) and the blocks of the others
    by their layout. The generated call passes them as text (`roles=`, `outputs=`), which the
    pieces read."""

    LHS = "lhs"
    RHS = "rhs"
    RHS_T = "rhs_t"
    IMAGE = "image"
    TAPS = "taps"
    TILE = "tile"
    ROW = "row"
    COL = "col"
    SCALAR = "scalar"


@dataclass(frozen=True)
class HeadOperand:
    """An operand of the matmul or convolution heading a stage, as the stage's wrapper takes it."""

    var: Var
    role: OperandRole  # LHS, RHS, RHS_T, IMAGE or TAPS
    batched: bool
    form: tuple[Dim, ...]  # the array the stage's piece receives


@dataclass(eq=False)
class Stage:
    """A row-wise stage: the reference's element-wise and row-wise equations on (tm, tn) tiles,
    or on blocks of whole rows when a reduction or a group reaches across the columns. Its
    kernel is pieces/rowwise.py's; render.py writes its body and parameters."""

    number: int
    frame: Frame
    eqns: list[Eqn] = field(default_factory=list)
    kinds: dict[Var, Kind] = field(default_factory=dict)
    inputs: list[Var] = field(default_factory=list)
    outputs: list[Var] = field(default_factory=list)

    reduces_rows: ClassVar[bool] = False  # only a column-reduction stage reduces over its rows
    head_scratch: ClassVar[int] = 0  # tile-sized f32 values of its head, besides the blocks

    def kind(self, operand: Operand) -> Kind:
        return Kind(SCALAR) if isinstance(operand, Literal) else self.kinds[operand]

    @property
    def full_cols(self) -> bool:
        """Whether a block must span every column: a row-wise reduction or groups of columns."""
        return any(k.name == GROUP_ROW or k.width is not None for k in self.kinds.values()) or any(
            (eqn.primitive in REDUCTIONS or picks_one_per_row(eqn.primitive, eqn.params))
            and self.kind(eqn.inputs[0]).spans_cols
            and not self.kind(eqn.outputs[0]).spans_cols
            for eqn in self.eqns
        )

    @property
    def batched(self) -> bool:
        return bool(self.frame.batch)

    @property
    def head(self) -> Matmul | Conv | None:
        return None

    @property
    def head_result(self) -> Var | None:
        return self.head.result if self.head else None

    @property
    def heads(self) -> list[Matmul | Conv]:
        """Every matmul or convolution the stage computes before its epilogue."""
        return [self.head] if self.head else []

    @property
    def reads(self) -> list[Var]:
        """The operands of the matmul or convolution that heads the stage, read from HBM."""
        return [o.var for o in self.head_operands()]

    def head_operands(self) -> list[HeadOperand]:
        return []

    # -- what the plan says of it -------------------------------------------------------------
    @property
    def label(self) -> str:
        return "row-wise" if self.full_cols else "element-wise"

    @property
    def family(self) -> str:
        """The plan's family when this is its only stage."""
        return "row-wise reduction" if self.full_cols else "element-wise"

    def summary(self) -> str:
        reach = "whole rows" if self.full_cols else "(rows, cols) tiles"
        return f"element-wise/row-wise body of {_epilogue(self)} over {reach}."


@dataclass(eq=False)
class ColumnReductionStage(Stage):
    """Reductions over rows (batch statistics, a mean over tokens): row blocks innermost and
    'arbitrary', each adding its partial result to f32 scratch; yields columns and scalars.
    Its kernel is pieces/rowwise.py's with accumulators."""

    reduces_rows: ClassVar[bool] = True

    @property
    def label(self) -> str:
        return "column-reduction"

    def summary(self) -> str:
        return (
            f"column reductions ({_epilogue(self)}) over (tm, tn) blocks, row blocks innermost "
            "and 'arbitrary'."
        )


@dataclass(eq=False, kw_only=True)
class MatmulStage(Stage):
    """A matmul (batched when the frame has batch dims) with its fused epilogue: depth last and
    'arbitrary', the sum in an f32 VMEM accumulator, the epilogue on the finished sum. Its kernel
    and wrapper are pieces/matmul.py's; render.py writes its epilogue and parameters."""

    matmul: Matmul
    # The same rows times other weights (same depth, columns and layout): the kernel reads each
    # block of rows once for all of them, each product summed in its own f32 accumulator.
    siblings: list[Matmul] = field(default_factory=list)

    head_scratch: ClassVar[int] = 1  # its f32 accumulator

    @property
    def head(self) -> Matmul:
        return self.matmul

    @property
    def heads(self) -> list[Matmul | Conv]:
        return [self.matmul, *self.siblings]

    def head_operands(self) -> list[HeadOperand]:
        matmul, frame = self.matmul, self.frame
        batch = (frame.batch_count,) if self.batched else ()
        rows, cols, depth = frame.row_count, frame.cols, matmul.depth
        lhs = HeadOperand(matmul.lhs, OperandRole.LHS, self.batched, batch + (rows, depth))
        if matmul.rhs_transposed:
            role, form = OperandRole.RHS_T, batch + (cols, depth)
        else:
            role, form = OperandRole.RHS, batch + (depth, cols)
        weights = [HeadOperand(m.rhs, role, self.batched, form) for m in (matmul, *self.siblings)]
        return [lhs, *weights]

    @property
    def label(self) -> str:
        return "batched matmul" if self.batched else "matmul"

    @property
    def family(self) -> str:
        if self.batched:
            return "batched matmul"
        return "matmul + row-wise epilogue" if self.full_cols else "matmul + element-wise epilogue"

    def summary(self, running: bool = False) -> str:
        """`running`: the epilogue carries running statistics across column blocks."""
        matmul = self.matmul
        weight = (
            "a (cols, depth) weight, contracted on its last axis"
            if matmul.rhs_transposed
            else "a (depth, cols) weight"
        )
        batch = "batched " if self.batched else ""
        if self.siblings:
            weight = (
                f"{len(self.siblings) + 1} weights stored (cols, depth), contracted on their "
                "last axis"
                if matmul.rhs_transposed
                else f"{len(self.siblings) + 1} (depth, cols) weights"
            )
            weight += ", each block of rows read once for all of them"
        reach = ""
        if running:
            reach = (
                "; the epilogue runs over (tm, tn) blocks, carrying the rows' statistics (sums, "
                "maxima, rescaled sums of exponentials, picked elements) across column blocks"
            )
        elif self.full_cols:
            reach = "; a block spans every column since the epilogue reduces over them"
        accumulators = "an f32 accumulator each" if self.siblings else "f32 accumulator"
        return (
            f"{batch}matmul of {np.dtype(matmul.lhs.dtype).name} rows with {weight}, "
            f"{accumulators} in VMEM, depth last and 'arbitrary'; fused epilogue of "
            f"{_epilogue(self)}{reach}."
        )


@dataclass(eq=False, kw_only=True)
class ConvStage(Stage):
    """A convolution as an implicit GEMM, frame (batch,) x (out channels,) x pixels: per image
    and block of output channels, the image read once and its taps formed in VMEM, one matmul
    per chunk of output rows. Its kernel is pieces/conv.py's; render.py writes its epilogue and
    parameters."""

    conv: Conv

    head_scratch: ClassVar[int] = 2  # the sum of a block of rows, beside the epilogue's values

    @property
    def head(self) -> Conv:
        return self.conv

    @property
    def full_rows(self) -> bool:
        """Whether its epilogue reduces over every output channel: one block holds them all."""
        return any(
            eqn.primitive in REDUCTIONS
            and spans_every_channel(self.kind(eqn.inputs[0]), self.kinds[eqn.outputs[0]])
            for eqn in self.eqns
        )

    @property
    def row_groups(self) -> tuple[Dim, ...]:
        """The widths of the groups of adjacent channels its epilogue reduces over: each block
        of channels holds whole groups."""
        widths = (k.width for k in self.kinds.values() if k.name == ROW_GROUP and k.width)
        return tuple(dict.fromkeys(widths))

    def head_operands(self) -> list[HeadOperand]:
        # The piece reads the image as it is and lays the kernel out tap by tap.
        conv = self.conv
        return [
            HeadOperand(conv.image, OperandRole.IMAGE, True, conv.image.shape),
            HeadOperand(conv.kernel, OperandRole.TAPS, False, conv.kernel.shape),
        ]

    @property
    def label(self) -> str:
        return "convolution"

    @property
    def family(self) -> str:
        return "convolution (implicit GEMM) + epilogue"

    def summary(self) -> str:
        return (
            "convolution as an implicit GEMM: per image and block of output channels, the image "
            "read from HBM once and every tap a lane-shifted slice of it in VMEM, one matmul per "
            "chunk of output rows, summed in f32; fused epilogue of "
            f"{_epilogue(self)}."
        )


def asked_precision(eqn: Eqn) -> str | None:
    """ "HIGHEST" when a matmul or convolution equation of the reference asks for it, else None."""
    asked = eqn.params.get("precision")
    return "HIGHEST" if asked is not None and "HIGHEST" in str(asked) else None


def mxu_heads(stages: list[Stage]) -> list[Matmul | Conv]:
    """Every matmul and convolution of the plan in plan order (a stage's siblings after its
    head): the reference's dot_general and conv_general_dilated equations in program order, each
    with its own operand precision (precision.py)."""
    return [head for stage in stages for head in stage.heads]


def _epilogue(stage: Stage) -> str:
    return f"{len(stage.eqns)} equation(s) of the reference"
