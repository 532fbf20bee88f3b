"""What the harness asks of the production tiles check (evaluation/tiles/sampled_run.py): how many
blocks to sample and the sample's seed, a function of the kernel and the task. No jax.
"""

from __future__ import annotations

import hashlib
import os

from maxkernel_tui.kernels.evaluation.protocol import TilesRequest
from maxkernel_tui.kernels.task import Task

TILE_BLOCKS_VARIABLE = "MAXKERNEL_TUI_TILE_BLOCKS"
DEFAULT_TILE_BLOCKS = 4
# The production inputs' seed: fixed, so the inputs are made once per task and kept in the cache.
PRODUCTION_INPUT_SEED = 0
SEED_LIMIT = 2**31 - 1  # numpy's and the report's seeds are non-negative 31-bit integers


def default_tile_blocks() -> int | None:
    """MAXKERNEL_TUI_TILE_BLOCKS: the blocks drawn beyond each output grid's corners (default
    4), or `off` for no production tiles."""
    value = os.environ.get(TILE_BLOCKS_VARIABLE, "").strip().lower()
    if value in ("off", "none", "no"):
        return None
    return int(value) if value.isdigit() else DEFAULT_TILE_BLOCKS


def sample_seed(source: str, task_digest: str, config: str, tile_blocks: int) -> int:
    """The sample's seed: a digest of the kernel's source, the task's snapshot and what is
    sampled, so the same kernel on the same task gets the same sample, and the same verdict,
    every time (a fresh draw per evaluation rejected a near-tolerance kernel on some draws only).
    Whether a sample sees every kind of block is the block classes' job, not the seed's luck."""
    parts = (task_digest, config, str(tile_blocks), source)
    digest = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_LIMIT


def request(
    task: Task, tile_blocks: int | None, *, whole: bool, source: str, task_digest: str
) -> TilesRequest | None:
    """Sampled production tiles for a whole evaluation (not an edge-case pass or a single
    configuration) of a task with smaller shapes to check on, of the kernel whose source is
    `source` on the task snapshot whose digest is `task_digest`."""
    if tile_blocks is None or not whole:
        return None
    if len(task.configs) < 2:
        return None  # production shapes are the only ones: numerics runs them in full
    seed = sample_seed(source, task_digest, task.configs[0], tile_blocks)
    return TilesRequest(PRODUCTION_INPUT_SEED, seed, tile_blocks)
