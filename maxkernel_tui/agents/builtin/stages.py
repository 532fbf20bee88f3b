"""The kinds of stage a plan is made of, one class each: a matmul (batched or not), a
convolution, a row-wise stage (element-wise and row reductions) and a column-reduction stage.

Each kind knows what the planner asks of it (what heads it, whether it reduces over rows) and
what the renderer writes for it: its grid and dimension semantics, how its wrapper picks block
sizes, its scratch and its kernel's source. render.py writes what every stage shares and asks
the stage for the rest. No jax here beyond the planner's own values (program.py imports it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.layout import GROUP_ROW, SCALAR, Frame, Kind
from maxkernel_tui.agents.builtin.operand_precision import OperandPrecision
from maxkernel_tui.agents.builtin.primitives import REDUCTIONS, picks_one_per_row
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Var

if TYPE_CHECKING:
    from maxkernel_tui.agents.builtin.epilogue import KernelBody


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
    def precision(self) -> str | None:
        """ "HIGHEST" when the reference asks for it, as `Matmul.precision`."""
        return asked_precision(self.eqn)


@dataclass(frozen=True)
class HeadOperand:
    """An operand of the matmul or convolution heading a stage, as the stage's wrapper takes it."""

    var: Var
    role: str  # lhs, rhs, rhs_t, image, taps
    batched: bool
    form: tuple[Dim, ...]  # the array the stage receives
    block: tuple[str, ...]  # the block (rows and cols last), as source


@dataclass(eq=False)
class Stage:
    """A row-wise stage: the reference's element-wise and row-wise equations on (tm, tn) tiles,
    or on blocks of whole rows when a reduction or a group reaches across the columns. Its
    wrapper is pieces/rowwise.py's; render.py writes its body and parameters. The stages that
    derive from it keep their own rendered grid and kernel."""

    number: int
    frame: Frame
    eqns: list[Eqn] = field(default_factory=list)
    kinds: dict[Var, Kind] = field(default_factory=dict)
    inputs: list[Var] = field(default_factory=list)
    outputs: list[Var] = field(default_factory=list)

    reduces_rows: ClassVar[bool] = False  # only a column-reduction stage reduces over its rows
    takes_sizes: ClassVar[bool] = True  # its wrapper is told rows and cols (no head to read)
    footprint_params: ClassVar[str] = "tm"
    head_scratch: ClassVar[int] = 0  # tile-sized f32 values of its head, besides the blocks
    fit_helper: ClassVar[str] = parts.FIT_ROWS

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

    # -- its grid and its wrapper (a row-wise stage's are pieces/rowwise.py's; the column
    # reduction and the convolution say theirs) ----------------------------------------------
    @property
    def grid(self) -> tuple[str, ...]:
        raise NotImplementedError("a row-wise stage's grid is pieces/rowwise.py's")

    @property
    def semantics(self) -> str:
        raise NotImplementedError("a row-wise stage's semantics are pieces/rowwise.py's")

    @property
    def grid_source(self) -> str:
        raise NotImplementedError("a row-wise stage's grid is pieces/rowwise.py's")

    def wrapper_shape_lines(self, params: list[str]) -> list[str]:
        """The wrapper's lines that read the stage's sizes from its operands."""
        return []

    def cols_block_line(self, tiled: bool) -> str:
        if self.full_cols:
            return "    tn = cols  # the epilogue reduces over columns: a block spans every column"
        if not tiled:
            return "    tn = cols  # no block is tiled along columns"
        return "    tn = _pick_block(cols, BLOCK_COLS, 128)"

    def fit_line(self, align: int) -> str:
        return f"    tm = _fit_rows(rows, tm, {align}, footprint)"

    def partial_keywords(self, body: KernelBody, symbols: list[str]) -> list[str]:
        return [f"{k}={k}" for k in body.keywords]

    def scratch_shapes(self, body: KernelBody) -> str | None:
        if not body.accumulators:
            return None
        return ", ".join(f"pltpu.VMEM({shape}, jnp.float32)" for shape, _ in body.accumulators)

    def called(self, params: list[str]) -> str:
        return ", ".join(params)

    # -- its kernel ----------------------------------------------------------------------------
    def scratch_refs(self, body: KernelBody) -> list[str]:
        return [f"acc{n}_ref" for n in range(len(body.accumulators))]

    def kernel_keywords(self, body: KernelBody) -> list[str]:
        return body.keywords

    def kernel_source(self, header: str, refs: list[str], body: KernelBody) -> str:
        raise NotImplementedError("a row-wise stage's kernel is its body, run by pieces/rowwise.py")


@dataclass(eq=False)
class ColumnReductionStage(Stage):
    """Reductions over rows (batch statistics, a mean over tokens): row blocks innermost and
    'arbitrary', each adding its partial result to f32 scratch; yields columns and scalars."""

    reduces_rows: ClassVar[bool] = True

    @property
    def label(self) -> str:
        return "column-reduction"

    def summary(self) -> str:
        return (
            f"column reductions ({_epilogue(self)}) over (tm, tn) blocks, row blocks innermost "
            "and 'arbitrary'."
        )

    @property
    def grid(self) -> tuple[str, ...]:
        return parts.COLUMN_REDUCTION_GRID

    @property
    def semantics(self) -> str:
        return '"parallel", "arbitrary"'

    @property
    def grid_source(self) -> str:
        return "cols // tn, rows // tm"

    def kernel_source(self, header: str, refs: list[str], body: KernelBody) -> str:
        starts = [
            f"        acc{n}_ref[...] = jnp.full({shape}, {initial}, jnp.float32)"
            for n, (shape, initial) in enumerate(body.accumulators)
        ]
        return (
            f"{header}\n"
            f'    """Stage {self.number}: reductions over rows. Row blocks are the innermost grid '
            "axis; each adds\n    its partial result to f32 scratch, read once the last row block "
            'is in."""\n'
            "    i = pl.program_id(1)\n\n"
            "    @pl.when(i == 0)\n"
            "    def _start():\n"
            + "\n".join(starts)
            + "\n\n"
            + "\n".join(indent(body.step_lines, 1))
            + "\n\n"
            "    @pl.when(i == pl.num_programs(1) - 1)\n"
            "    def _finish():\n" + "\n".join(indent(body.lines, 2)) + "\n"
        )


@dataclass(eq=False, kw_only=True)
class MatmulStage(Stage):
    """A matmul (batched when the frame has batch dims) with its fused epilogue: depth last and
    'arbitrary', the sum in an f32 VMEM accumulator, the epilogue on the finished sum. Its kernel
    and wrapper are pieces/matmul.py's; render.py writes its epilogue and parameters."""

    matmul: Matmul

    takes_sizes: ClassVar[bool] = False
    head_scratch: ClassVar[int] = 1
    fit_helper: ClassVar[str] = parts.FIT_BLOCKS  # pieces/matmul.py's wrapper calls it

    @property
    def head(self) -> Matmul:
        return self.matmul

    def head_operands(self) -> list[HeadOperand]:
        matmul, frame = self.matmul, self.frame
        batch = (frame.batch_count,) if self.batched else ()
        rows, cols, depth = frame.row_count, frame.cols, matmul.depth
        lhs = HeadOperand(matmul.lhs, "lhs", self.batched, batch + (rows, depth), ("tm", "tk"))
        if matmul.rhs_transposed:
            rhs = HeadOperand(
                matmul.rhs, "rhs_t", self.batched, batch + (cols, depth), ("tn", "tk")
            )
        else:
            rhs = HeadOperand(matmul.rhs, "rhs", self.batched, batch + (depth, cols), ("tk", "tn"))
        return [lhs, rhs]

    @property
    def label(self) -> str:
        return "batched matmul" if self.batched else "matmul"

    @property
    def family(self) -> str:
        if self.batched:
            return "batched matmul"
        return "matmul + row-wise epilogue" if self.full_cols else "matmul + element-wise epilogue"

    def summary(self) -> str:
        matmul = self.matmul
        weight = (
            "a (cols, depth) weight, contracted on its last axis"
            if matmul.rhs_transposed
            else "a (depth, cols) weight"
        )
        batch = "batched " if self.batched else ""
        reach = (
            "; a block spans every column since the epilogue reduces over them"
            if self.full_cols
            else ""
        )
        return (
            f"{batch}matmul of {np.dtype(matmul.lhs.dtype).name} rows with {weight}, f32 "
            f"accumulator in VMEM, depth last and 'arbitrary'; fused epilogue of "
            f"{_epilogue(self)}{reach}."
        )


@dataclass(eq=False, kw_only=True)
class ConvStage(Stage):
    """A convolution as an implicit GEMM, frame (batch,) x (out channels,) x pixels: per image
    and block of output channels, one matmul per tap on a lane-shifted view of the image."""

    conv: Conv

    takes_sizes: ClassVar[bool] = False
    head_scratch: ClassVar[int] = 2  # its sum, beside a shifted view of the image

    @property
    def head(self) -> Conv:
        return self.conv

    def head_operands(self) -> list[HeadOperand]:
        # The wrapper passes the image as column-shifted copies and the kernel tap-major.
        conv = self.conv
        return [
            HeadOperand(
                conv.image,
                "image",
                True,
                conv.image.shape,
                ("taps_w", "channels", "height * out_width"),
            ),
            HeadOperand(
                conv.kernel, "taps", False, conv.kernel.shape, ("taps_h * taps_w", "tm", "channels")
            ),
        ]

    @property
    def label(self) -> str:
        return "convolution"

    @property
    def family(self) -> str:
        return "convolution (implicit GEMM) + epilogue"

    def summary(self) -> str:
        return (
            "convolution as an implicit GEMM: per image and block of output channels, one matmul "
            "per tap on a lane-shifted view of the image, summed in f32; fused epilogue of "
            f"{_epilogue(self)}."
        )

    @property
    def grid(self) -> tuple[str, ...]:
        return parts.IMAGE_GRID

    @property
    def semantics(self) -> str:
        return '"parallel", "parallel", "parallel"'

    @property
    def grid_source(self) -> str:
        return "batch, rows // tm, cols // tn"

    def wrapper_shape_lines(self, params: list[str]) -> list[str]:
        """The convolution wrapper's shapes, and the layouts XLA prepares for the kernel."""
        image, kernel = params[0], params[1]
        return [
            f"    batch, channels, height, width = {image}.shape",
            f"    rows, _, taps_h, taps_w = {kernel}.shape",
            "    out_height, out_width = height - taps_h + 1, width - taps_w + 1",
            "    cols = out_height * out_width",
            "    # XLA lays out taps_w column-shifted copies of the image, rows of pixels "
            "flattened: tap",
            "    # (dh, dw) of output pixel p is then pixel p + dh * out_width of copy dw, a lane "
            "offset.",
            f"    shifted = jnp.stack([{image}[:, :, :, dw:dw + out_width] for dw in "
            "range(taps_w)], axis=1)",
            "    shifted = shifted.reshape(batch, taps_w, channels, height * out_width)",
            f"    taps = jnp.transpose({kernel}, (2, 3, 0, 1)).reshape(taps_h * taps_w, rows, "
            "channels)",
        ]

    def cols_block_line(self, tiled: bool) -> str:
        return "    tn = cols  # whole images: the taps reach across rows of pixels"

    def partial_keywords(self, body: KernelBody, symbols: list[str]) -> list[str]:
        return [f"{k}={k}" for k in ("tm", "tn", *symbols)] + [
            "taps_h=taps_h",
            "taps_w=taps_w",
            "row_len=out_width",
        ]

    def called(self, params: list[str]) -> str:
        return ", ".join(["shifted", "taps", *params[2:]])

    def kernel_keywords(self, body: KernelBody) -> list[str]:
        # Its body always needs the block sizes and the tap geometry.
        rest = [k for k in body.keywords if k not in ("tm", "tn")]
        return ["tm", "tn", *rest, "taps_h", "taps_w", "row_len"]

    def kernel_source(
        self,
        header: str,
        refs: list[str],
        body: KernelBody,
        operands: OperandPrecision | None = None,
    ) -> str:
        """`operands`: the precision chosen for the taps' matmuls (operand_precision.py); None
        keeps the operands' own dtype at the reference's precision."""
        image_ref, taps_ref = refs[0], refs[1]
        weights, view = f"{taps_ref}[dh * taps_w + dw]", "view"
        highest = operands == "highest" or (operands is None and self.conv.precision)
        precision = ", precision=jax.lax.Precision.HIGHEST" if highest else ""
        why = ""
        if operands == "bf16" and np.dtype(self.conv.image.dtype).itemsize > 2:
            weights, view = f"{weights}.astype(jnp.bfloat16)", "view.astype(jnp.bfloat16)"
            why = (
                "    # bf16 operands, f32 accumulation: one MXU pass per tap, and the numerics "
                "stay within\n    # the task's tolerance with them (see the docstring).\n"
            )
        elif operands == "f32":
            why = (
                "    # f32 operands: with bf16 ones the numerics leave the task's tolerance (see "
                "the docstring).\n"
            )
        return (
            f"{header}\n"
            f'    """Stage {self.number}: the convolution of one image for a block of output '
            "channels, as an\n"
            "    implicit GEMM: each tap's (tm, channels) weights times the image's channels seen "
            "at the\n"
            '    tap\'s lane offset, summed in f32; then the epilogue."""\n'
            f"{why}"
            "    acc = jnp.zeros((tm, tn), jnp.float32)\n"
            "    for dh in range(taps_h):  # unrolled while tracing: taps_h * taps_w matmuls\n"
            "        for dw in range(taps_w):\n"
            f"            view = {image_ref}[dw, :, pl.ds(dh * row_len, tn)]\n"
            f"            acc += jnp.dot({weights}, {view}, "
            f"preferred_element_type=jnp.float32{precision})\n\n"
            "    # The epilogue, translated equation by equation from the reference's jaxpr.\n"
            + "\n".join(indent(body.lines, 1))
            + "\n"
        )


def asked_precision(eqn: Eqn) -> str | None:
    """ "HIGHEST" when a matmul or convolution equation of the reference asks for it, else None."""
    asked = eqn.params.get("precision")
    return "HIGHEST" if asked is not None and "HIGHEST" in str(asked) else None


def mxu_stages(stages: list[Stage]) -> list[Stage]:
    """The stages headed by a matmul or a convolution, in plan order: each gets one operand
    precision (operand_precision.py), as the reference's dot_general or conv_general_dilated
    equations do in program order (precision.py)."""
    return [stage for stage in stages if stage.head is not None]


def indent(lines: list[str], depth: int) -> list[str]:
    return [("    " * depth) + line for line in lines]


def _epilogue(stage: Stage) -> str:
    return f"{len(stage.eqns)} equation(s) of the reference"
