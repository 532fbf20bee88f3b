"""What the harness asks of the production tiles check (evaluation/production_tiles.py): how many
blocks to sample, a fresh sample seed per evaluation, and the candidate's private copy of the
inputs the cached reference was computed on. No jax.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import replace
from pathlib import Path

from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, TilesRequest
from maxkernel_tui.kernels.task import Task

TILE_BLOCKS_VARIABLE = "MAXKERNEL_TUI_TILE_BLOCKS"
DEFAULT_TILE_BLOCKS = 4
# The production inputs' seed: fixed, so the reference's production outputs are computed once per
# task and kept in the cache; the sample of tiles is what is fresh each evaluation.
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


def with_private_inputs(
    tiles: TilesRequest, reference: NumericsRun, workdir: Path
) -> TilesRequest | None:
    """The request with a copy of the reference's inputs in the candidate's own directory (it
    may read nothing else); None when the reference has no production outputs."""
    if reference.files is None or not reference.inputs:
        return None
    private = workdir / "production-inputs"
    private.mkdir()
    return replace(tiles, inputs=[str(shutil.copy(path, private)) for path in reference.inputs])
