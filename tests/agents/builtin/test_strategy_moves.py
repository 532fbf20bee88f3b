"""The built-in agent applies a search strategy as a real change of a kernel's declared tunables
(block sizes per axis, buffer count, fusion) or of a matmul's operand precision where the
tolerance allows it, or says it has none for that kernel (never the same kernel again)."""

import ast

import pytest

from maxkernel_tui.agents.builtin.operand_precision import OperandPrecision
from maxkernel_tui.agents.builtin.provider import BuiltinProvider
from maxkernel_tui.agents.builtin.strategy_moves import MOVES, NoMove, apply_strategy, no_move
from maxkernel_tui.agents.roles.tunables import find_tunables
from maxkernel_tui.agents.search.algorithms import MoveCheck
from maxkernel_tui.agents.strategies import STRATEGIES
from tests.support.engine import GOOD  # the RMSNorm kernel: one tunable, BLOCK_ROWS = 256

GEMM = """\
import jax

# Tunables: preferred block sizes.
BLOCK_ROWS = 256
BLOCK_COLS = 512
BLOCK_DEPTH = 512


def computation(x, w):
    return x @ w
"""


def test_growing_and_shrinking_row_blocks_change_the_row_block():
    assert find_tunables(GOOD) == {"BLOCK_ROWS": 256}
    grown, words = apply_strategy(GOOD, "grow-row-blocks")
    assert find_tunables(grown) == {"BLOCK_ROWS": 512} and words == "BLOCK_ROWS 256 → 512"
    shrunk, _ = apply_strategy(GOOD, "shrink-row-blocks")
    assert find_tunables(shrunk) == {"BLOCK_ROWS": 128}


def test_square_tiles_and_fewer_steps_on_a_matmul():
    square, _ = apply_strategy(GEMM, "square-output-tiles")
    assert find_tunables(square) == {"BLOCK_ROWS": 512, "BLOCK_COLS": 512, "BLOCK_DEPTH": 512}
    fewer, _ = apply_strategy(GEMM, "fewer-grid-steps")
    assert find_tunables(fewer) == {"BLOCK_ROWS": 512, "BLOCK_COLS": 1024, "BLOCK_DEPTH": 1024}


def test_a_strategy_that_changes_nothing_here_is_said_so():
    with pytest.raises(NoMove, match=r"changes nothing in this kernel .*BLOCK_ROWS = 256"):
        apply_strategy(GOOD, "square-output-tiles")  # a row-wise kernel has no output tile


def test_a_strategy_without_a_move_is_said_so():
    with pytest.raises(NoMove, match="no move for strategy 'manual-dma-ring'"):
        apply_strategy(GOOD, "manual-dma-ring")


def test_every_move_is_a_strategy_of_the_library():
    assert set(MOVES) <= {s.name for s in STRATEGIES}


def test_the_agent_names_the_strategies_it_has_no_move_for_before_a_node_is_spent():
    agent = BuiltinProvider()
    assert isinstance(agent, MoveCheck)  # what a search asks before it plans a node
    assert agent.no_move("grow-row-blocks", GOOD) is None
    manual = agent.no_move("manual-dma-ring", GOOD) or ""
    assert "no move for strategy 'manual-dma-ring'" in manual
    assert "changes nothing in this kernel" in (agent.no_move("square-output-tiles", GOOD) or "")


def test_each_axis_of_a_matmul_moves_alone():
    assert find_tunables(apply_strategy(GEMM, "grow-col-blocks")[0])["BLOCK_COLS"] == 1024
    assert find_tunables(apply_strategy(GEMM, "shrink-col-blocks")[0])["BLOCK_COLS"] == 256
    deeper = find_tunables(apply_strategy(GEMM, "grow-depth-blocks")[0])
    assert deeper == {"BLOCK_ROWS": 256, "BLOCK_COLS": 512, "BLOCK_DEPTH": 1024}


SWITCHED = GEMM.replace(
    "BLOCK_DEPTH = 512\n", "BLOCK_DEPTH = 512\nBUFFER_COUNT = 2\nFUSE_EPILOGUE = 0\n"
)


def test_buffer_count_and_fusion_move_the_tunables_a_kernel_declares():
    deeper, words = apply_strategy(SWITCHED, "deeper-pipeline")
    assert find_tunables(deeper)["BUFFER_COUNT"] == 3 and words == "BUFFER_COUNT 2 → 3"
    with pytest.raises(NoMove, match="changes nothing"):
        apply_strategy(deeper, "deeper-pipeline")  # at the most the kernel is given
    assert find_tunables(apply_strategy(SWITCHED, "shallower-pipeline")[0])["BUFFER_COUNT"] == 1
    fused, words = apply_strategy(SWITCHED, "fuse-rowwise-epilogue")
    assert find_tunables(fused)["FUSE_EPILOGUE"] == 1 and words == "FUSE_EPILOGUE 0 → 1"
    assert find_tunables(apply_strategy(fused, "split-fused-stages")[0])["FUSE_EPILOGUE"] == 0


@pytest.mark.parametrize(
    "strategy, tunable",
    [("deeper-pipeline", "BUFFER_COUNT"), ("fuse-rowwise-epilogue", "FUSE_EPILOGUE")],
)
def test_a_switch_the_kernel_does_not_declare_is_no_move_and_says_which(strategy, tunable):
    reason = no_move(GEMM, strategy) or ""
    assert f"needs the kernel to declare the tunable {tunable}" in reason
    assert "BLOCK_ROWS, BLOCK_COLS, BLOCK_DEPTH" in reason


MATMULS = GEMM.replace(
    "    return x @ w\n",
    "    y = _matmul_stage(x, w, roles=(),\n                      epilogue=_e)\n"
    "    z = _matmul_stage(y, w, epilogue=_e, operands='highest')\n"
    "    return _matmul_stage(z, w, epilogue=_e)\n",
)


def test_bf16_operands_go_only_where_the_tolerance_check_allows_them():
    allowed = (OperandPrecision.BF16, OperandPrecision.HIGHEST, OperandPrecision.BF16X3)
    lowered, words = apply_strategy(MATMULS, "bf16-operands", allowed)
    assert "                      epilogue=_e, operands='bf16')\n" in lowered
    assert "_matmul_stage(z, w, epilogue=_e)\n" in lowered  # the tolerance kept f32 there
    assert "operands='highest'" in lowered  # never lowered: the reference asks for it
    assert words == "matmul 1 f32 → bf16 operands (the tolerance check allows them)"
    ast.parse(lowered)
    with pytest.raises(NoMove, match="tolerance check keeps f32 operands"):
        apply_strategy(MATMULS, "bf16-operands", (OperandPrecision.BF16X3,) * 3)
    with pytest.raises(NoMove, match="not known"):
        apply_strategy(MATMULS, "bf16-operands")  # no choice: never a guess
    with pytest.raises(NoMove, match="already states"):
        apply_strategy(
            lowered.replace("epilogue=_e)", "epilogue=_e, operands='f32')"),
            "bf16-operands",
            allowed,
        )


def test_the_agent_leaves_a_possible_precision_move_to_its_worker():
    assert no_move(MATMULS, "bf16-operands") is None  # the worker runs the tolerance check
    assert "runs no matmul" in (no_move(GEMM, "bf16-operands") or "")
