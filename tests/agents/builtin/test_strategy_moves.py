"""The built-in agent applies a search strategy as a real change of a kernel's declared block
sizes, or says it has none for that kernel (never the same kernel again)."""

import pytest

from maxkernel_tui.agents.builtin.provider import BuiltinProvider
from maxkernel_tui.agents.builtin.strategy_moves import MOVES, NoMove, apply_strategy
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
