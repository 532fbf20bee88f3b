"""The stage kinds as classes: each one's grid, dimension semantics, wrapper lines and kernel
source, on hand-built stages (no tracing), and the kernels they write parse as Python."""

from __future__ import annotations

import ast
from fractions import Fraction

import numpy as np
import pytest

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.epilogue import KernelBody
from maxkernel_tui.agents.builtin.layout import Frame
from maxkernel_tui.agents.builtin.program import Eqn, Var
from maxkernel_tui.agents.builtin.stages import (
    ColumnReductionStage,
    Conv,
    ConvStage,
    Matmul,
    MatmulStage,
    Stage,
    mxu_stages,
)

ROWS, COLS, DEPTH, BATCH = (Dim(Fraction(1), (name,)) for name in ("s0", "s1", "s2", "s3"))


def var(*dims: Dim) -> Var:
    return Var(dims, np.dtype(np.float32), tuple(8 for _ in dims))


def matmul_stage(batched: bool = False, transposed: bool = False) -> MatmulStage:
    lead = (BATCH,) if batched else ()
    lhs, out = var(*lead, ROWS, DEPTH), var(*lead, ROWS, COLS)
    rhs = var(*lead, COLS, DEPTH) if transposed else var(*lead, DEPTH, COLS)
    eqn = Eqn("dot_general", [lhs, rhs], [out], {})
    matmul = Matmul(eqn, lhs, rhs, transposed, DEPTH, None)
    return MatmulStage(1, Frame(lead, (ROWS,), COLS), matmul=matmul)


def conv_stage() -> ConvStage:
    image, kernel = var(BATCH, DEPTH, ROWS, ROWS), var(COLS, DEPTH, Dim.const(3), Dim.const(3))
    out = var(BATCH, COLS, ROWS, ROWS)
    conv = Conv(Eqn("conv_general_dilated", [image, kernel], [out], {}), image, kernel)
    return ConvStage(1, Frame((BATCH,), (COLS,), ROWS * ROWS), conv=conv)


STAGES = {
    "element-wise": Stage(1, Frame((), (ROWS,), COLS)),
    "column-reduction": ColumnReductionStage(1, Frame((), (ROWS,), COLS)),
    "matmul": matmul_stage(),
    "batched matmul": matmul_stage(batched=True),
    "convolution": conv_stage(),
}


@pytest.mark.parametrize(
    ("label", "grid", "semantics", "grid_source"),
    [
        (
            "column-reduction",
            parts.COLUMN_REDUCTION_GRID,
            '"parallel", "arbitrary"',
            "cols // tn, rows // tm",
        ),
        (
            "convolution",
            parts.IMAGE_GRID,
            '"parallel", "parallel", "parallel"',
            "batch, rows // tm, cols // tn",
        ),
    ],
)
def test_each_kind_has_its_own_grid_and_semantics(label, grid, semantics, grid_source):
    # (Matmul and row-wise stages' grids are pieces/matmul.py's and rowwise.py's, run in
    # test_matmul_piece.py and test_rowwise_piece.py.)
    stage = STAGES[label]
    assert stage.label == label
    assert (stage.grid, stage.semantics, stage.grid_source) == (grid, semantics, grid_source)
    # As many semantics as grid axes: the compiler params match the grid.
    assert semantics.count('"') // 2 == len(grid) == grid_source.count(",") + 1


def test_only_a_column_reduction_reduces_rows_and_only_heads_carry_scratch():
    assert [s.reduces_rows for s in STAGES.values()] == [False, True, False, False, False]
    assert [s.head_scratch for s in STAGES.values()] == [0, 0, 1, 1, 2]
    assert [s.takes_sizes for s in STAGES.values()] == [True, True, False, False, False]
    assert STAGES["matmul"].fit_helper == parts.FIT_BLOCKS
    assert STAGES["convolution"].fit_helper == parts.FIT_ROWS


def test_the_head_operands_are_read_in_the_layout_the_kernel_tiles():
    plain, transposed = matmul_stage(), matmul_stage(transposed=True)
    assert [(o.role, o.block) for o in plain.head_operands()] == [
        ("lhs", ("tm", "tk")),
        ("rhs", ("tk", "tn")),
    ]
    assert [(o.role, o.form) for o in transposed.head_operands()][1] == ("rhs_t", (COLS, DEPTH))
    assert plain.reads == [plain.matmul.lhs, plain.matmul.rhs]
    assert STAGES["element-wise"].reads == [] and STAGES["element-wise"].head is None
    assert [o.role for o in conv_stage().head_operands()] == ["image", "taps"]


def test_families_of_a_single_stage_plan():
    assert STAGES["element-wise"].family == "element-wise"
    assert STAGES["matmul"].family == "matmul + element-wise epilogue"
    assert STAGES["batched matmul"].family == "batched matmul"
    assert STAGES["convolution"].family == "convolution (implicit GEMM) + epilogue"


@pytest.mark.parametrize("label", ["column-reduction", "convolution"])
def test_every_kind_without_a_piece_of_its_own_writes_a_kernel_that_parses(label):
    # Matmul and row-wise stages run pieces/matmul.py's and rowwise.py's (their own tests).
    stage = STAGES[label]
    body = KernelBody(["out_ref[...] = y0"], ["tm", "tn"])
    if stage.reduces_rows:
        body.accumulators, body.step_lines = [("(1, tn)", "0.0")], ["acc0_ref[...] += 1.0"]
    refs = ["a_ref", "b_ref", "out_ref", *stage.scratch_refs(body)]
    names = ", ".join(stage.kernel_keywords(body))
    header = f"def _stage1_kernel({', '.join(refs)}, *, {names}):"
    source = stage.kernel_source(header, refs, body)
    ast.parse(source)
    assert source.startswith(header) and "out_ref[...] = y0" in source
    summary = stage.summary()
    assert summary.endswith(".") and "equation(s) of the reference" in summary


def test_the_stages_headed_by_a_matmul_or_a_convolution_each_take_one_operand_precision():
    assert mxu_stages(list(STAGES.values())) == [
        STAGES["matmul"],
        STAGES["batched matmul"],
        STAGES["convolution"],
    ]


def test_a_convolution_casts_its_f32_operands_to_bf16_only_when_that_precision_is_chosen():
    stage = STAGES["convolution"]
    body = KernelBody(["out_ref[...] = y0"], ["tm", "tn"])
    refs = ["a_ref", "b_ref", "out_ref", *stage.scratch_refs(body)]
    header = f"def _stage1_kernel({', '.join(refs)}, *, {', '.join(stage.kernel_keywords(body))}):"
    bf16, own = (stage.kernel_source(header, refs, body, p) for p in ("bf16", None))
    ast.parse(bf16)
    assert bf16.count(".astype(jnp.bfloat16)") == 2 and "one MXU pass" in bf16
    assert ".astype(jnp.bfloat16)" not in own and "Precision.HIGHEST" not in own
    assert "Precision.HIGHEST" in stage.kernel_source(header, refs, body, "highest")
