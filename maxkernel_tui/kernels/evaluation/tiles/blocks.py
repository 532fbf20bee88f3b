"""Which grid axes of a pallas_call choose an output block, which blocks a sample holds, and
which elements of an output the sampled grid points write: the index maps evaluated on grid
points (jitted, vmapped). Imports jax.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.state.discharge import discharge_state

# Corners of the output grid always sampled while there are at most this many of them; above,
# the all-first and all-last blocks stand for them.
MAX_CORNERS = 8

# A region of an output: (start, size) per dimension, inside the array.
Region = tuple[tuple[int, int], ...]


def sample_blocks(
    sizes: tuple[int, ...], rng: np.random.Generator, random_blocks: int
) -> np.ndarray:
    """Sampled points of an output grid of `sizes`, one row each: every corner (or the
    all-first and all-last ones when there are more than MAX_CORNERS), the first and last
    block of each axis, and `random_blocks` drawn at random, without repeats, in grid order."""
    if not sizes:
        return np.zeros((1, 0), np.int64)
    ends = [sorted({0, size - 1}) for size in sizes]
    corners = list(itertools.product(*ends))
    if len(corners) > MAX_CORNERS:
        corners = [tuple(0 for _ in sizes), tuple(size - 1 for size in sizes)]
    chosen = set(corners)
    total = math.prod(sizes)
    wanted = min(total, len(chosen) + random_blocks)
    while len(chosen) < wanted:
        chosen.add(tuple(int(rng.integers(size)) for size in sizes))
    return np.array(sorted(chosen), dtype=np.int64)


def in_any_space(block: Any) -> bool:
    space = str(getattr(block.transformed_block_aval, "memory_space", "")).lower()
    return "any" in space or "hbm" in space


def dim_kind(dim: Any) -> str | None:
    for kind in ("Blocked", "Squeezed", "Element"):
        if type(dim).__name__ == kind:
            return kind
    return "Blocked" if isinstance(dim, int) else None


def find_output_axes(
    outputs: Sequence[Any], grid: tuple[int, ...], index_operands: list[np.ndarray]
) -> tuple[int, ...]:
    """Grid axes along which some output's block index changes (probed at a few points of every
    other axis)."""
    axes = []
    for axis, size in enumerate(grid):
        if size == 1:
            continue
        bases = [np.zeros(len(grid), np.int32), np.array([g - 1 for g in grid], np.int32)]
        moved = False
        for base in bases:
            points = np.repeat(base[None, :], size, axis=0)
            points[:, axis] = np.arange(size)
            for block in outputs:
                indices = block_indices(block, points, index_operands)
                if (indices != indices[0]).any():
                    moved = True
        if moved:
            axes.append(axis)
    return tuple(axes)


def block_indices(block: Any, points: np.ndarray, index_operands: list[np.ndarray]) -> np.ndarray:
    # scalar-prefetch operands are refs in an index map: read as the arrays given
    closed = discharge_state(block.index_map_jaxpr)
    rank = len(block.block_shape)

    def index_of(point: jax.Array) -> jax.Array:
        ids = [point[i] for i in range(points.shape[1])]
        outs = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *ids, *index_operands)[:rank]
        return jnp.stack([jnp.asarray(o, jnp.int32) for o in outs])

    return np.asarray(jax.jit(jax.vmap(index_of))(jnp.asarray(points, jnp.int32)))


def written(
    block: Any, points: np.ndarray, index_operands: list[np.ndarray], shape: tuple[int, ...]
) -> list[Region]:
    """The regions of an output inside a block visited at the sampled grid points (a partial
    last block cut at the array's end)."""
    regions = []
    for index in np.unique(block_indices(block, points, index_operands), axis=0):
        region = []
        for i, dim, extent in zip(index, block.block_shape, shape, strict=True):
            kind = dim_kind(dim)
            size = 1 if kind == "Squeezed" else dim if isinstance(dim, int) else dim.block_size
            start = int(i) * int(size) if kind == "Blocked" else int(i)
            start = min(max(start, 0), extent)
            region.append((start, min(int(size), extent - start)))
        if all(size > 0 for _, size in region):
            regions.append(tuple(region))
    return regions
