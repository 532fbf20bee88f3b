"""The stage kinds as classes, on hand-built stages (no tracing): what the planner asks of each
(whether it reduces rows, its head's operands and scratch), its family and its summary. Their
kernels are the pieces' (test_matmul_piece.py, test_rowwise_piece.py, test_conv_piece.py)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.layout import Frame
from maxkernel_tui.agents.builtin.program import Eqn, Var
from maxkernel_tui.agents.builtin.stages import (
    ColumnReductionStage,
    Conv,
    ConvStage,
    Matmul,
    MatmulStage,
    Stage,
    mxu_heads,
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


def test_only_a_column_reduction_reduces_rows_and_only_heads_carry_scratch():
    assert [s.reduces_rows for s in STAGES.values()] == [False, True, False, False, False]
    assert [s.head_scratch for s in STAGES.values()] == [0, 0, 1, 1, 2]


def test_the_head_operands_are_read_in_the_layout_the_kernel_tiles():
    plain, transposed = matmul_stage(), matmul_stage(transposed=True)
    assert [(o.role, o.form) for o in plain.head_operands()] == [
        ("lhs", (ROWS, DEPTH)),
        ("rhs", (DEPTH, COLS)),
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


@pytest.mark.parametrize("label", list(STAGES))
def test_every_kind_summarises_itself_in_a_sentence(label):
    summary = STAGES[label].summary()
    assert summary.endswith(".") and "equation(s) of the reference" in summary


def test_every_matmul_and_convolution_takes_one_operand_precision_siblings_after_their_head():
    assert mxu_heads(list(STAGES.values())) == [
        STAGES["matmul"].matmul,
        STAGES["batched matmul"].matmul,
        STAGES["convolution"].conv,
    ]
    shared, other = matmul_stage(), matmul_stage()
    shared.siblings.append(other.matmul)
    assert mxu_heads([STAGES["element-wise"], shared]) == [shared.matmul, other.matmul]


def test_a_sibling_matmul_reads_its_own_weight_beside_the_shared_rows():
    shared, other = matmul_stage(transposed=True), matmul_stage(transposed=True)
    shared.siblings.append(other.matmul)
    roles = [o.role for o in shared.head_operands()]
    assert roles == ["lhs", "rhs_t", "rhs_t"]
    assert shared.reads == [shared.matmul.lhs, shared.matmul.rhs, other.matmul.rhs]
    assert "2 weights stored (cols, depth)" in shared.summary()
    assert "an f32 accumulator each" in shared.summary()
