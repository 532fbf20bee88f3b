"""What the harness asks of the production tiles check (evaluation/tiles/sampled_run.py): how many
blocks to sample and a fresh sample seed per evaluation. No jax.
"""

from __future__ import annotations

import os
import secrets

from maxkernel_tui.kernels.evaluation.protocol import TilesRequest
from maxkernel_tui.kernels.task import Task

TILE_BLOCKS_VARIABLE = "MAXKERNEL_TUI_TILE_BLOCKS"
DEFAULT_TILE_BLOCKS = 4
# The production inputs' seed: fixed, so the inputs are made once per task and kept in the cache;
# the sample of tiles is what is fresh each evaluation.
PRODUCTION_INPUT_SEED = 0


def default_tile_blocks() -> int | None:
    """MAXKERNEL_TUI_TILE_BLOCKS: the blocks drawn beyond each output grid's corners (default
    4), or `off` for no production tiles."""
    value = os.environ.get(TILE_BLOCKS_VARIABLE, "").strip().lower()
    if value in ("off", "none", "no"):
        return None
    return int(value) if value.isdigit() else DEFAULT_TILE_BLOCKS


def request(task: Task, tile_blocks: int | None, *, whole: bool) -> TilesRequest | None:
    """Sampled production tiles for a whole evaluation (not an edge-case pass or a single
    configuration) of a task with smaller shapes to check on; a fresh sample every time."""
    if tile_blocks is None or not whole:
        return None
    if len(task.configs) < 2:
        return None  # production shapes are the only ones: numerics runs them in full
    return TilesRequest(PRODUCTION_INPUT_SEED, secrets.randbelow(2**31 - 1), tile_blocks)
