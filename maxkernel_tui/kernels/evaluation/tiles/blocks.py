"""Which output blocks a sample holds, and which elements of an output the sampled grid points
write: the index maps evaluated on grid points (jitted, vmapped). Which grid axes choose an output
block, and the classes of blocks a sample must cover, are classes.py's. Imports jax.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from maxkernel_tui.kernels.perf import index_maps

# Corners of the output grid always sampled while there are at most this many of them; above,
# the all-first and all-last blocks stand for them.
MAX_CORNERS = 8

# A region of an output: (start, size) per dimension, inside the array.
Region = tuple[tuple[int, int], ...]


def sample_blocks(
    sizes: tuple[int, ...],
    rng: np.random.Generator,
    random_blocks: int,
    required: np.ndarray | None = None,
) -> np.ndarray:
    """Sampled points of an output grid of `sizes`, one row each: every corner (or the
    all-first and all-last ones when there are more than MAX_CORNERS), the first and last
    block of each axis, the `required` rows, and `random_blocks` drawn at random, without
    repeats, in grid order."""
    if not sizes:
        return np.zeros((1, 0), np.int64)
    ends = [sorted({0, size - 1}) for size in sizes]
    corners = list(itertools.product(*ends))
    if len(corners) > MAX_CORNERS:
        corners = [tuple(0 for _ in sizes), tuple(size - 1 for size in sizes)]
    chosen = set(corners)
    if required is not None:
        chosen.update(tuple(int(i) for i in row) for row in required)
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


def block_indices(block: Any, points: np.ndarray, index_operands: list[np.ndarray]) -> np.ndarray:
    rank = len(block.block_shape)
    return index_maps.block_indices(block.index_map_jaxpr, points, index_operands)[:, :rank]


def spans(block: Any, indices: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The [start, stop) of the array a block covers at each row of block `indices`, per
    dimension (shape `(rows, rank, 2)`), cut at the array's end (empty where it lies past it)."""
    if not shape:
        return np.zeros((len(indices), 0, 2), np.int64)
    starts, sizes = [], []
    for column, dim in enumerate(block.block_shape):
        kind = dim_kind(dim)
        size = 1 if kind == "Squeezed" else dim if isinstance(dim, int) else dim.block_size
        index = indices[:, column].astype(np.int64)
        starts.append(index * int(size) if kind == "Blocked" else index)
        sizes.append(int(size))
    extent = np.array(shape, np.int64)
    start = np.clip(np.stack(starts, axis=1).reshape(len(indices), len(shape)), 0, extent)
    stop = np.minimum(start + np.array(sizes, np.int64), extent)
    return np.stack([start, stop], axis=2)


def written(
    block: Any, points: np.ndarray, index_operands: list[np.ndarray], shape: tuple[int, ...]
) -> list[Region]:
    """The regions of an output inside a block visited at the sampled grid points (a partial
    last block cut at the array's end)."""
    indices = np.unique(block_indices(block, points, index_operands), axis=0)
    return [
        tuple((int(start), int(stop - start)) for start, stop in row)
        for row in spans(block, indices, shape)
        if (row[:, 1] > row[:, 0]).all()
    ]
