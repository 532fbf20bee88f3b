"""The grouped matmul the built-in agent writes, one parameterised kernel and wrapper in the
manner of jax's pallas/ops/tpu/megablox: rows of `lhs` split into consecutive groups by
`group_sizes`, group g multiplied by `weights[g]`, f32 accumulation.

The work is a list of items, one per (group, row tile) pair a group touches, in group order; a
tile straddling a group boundary is visited once per group in it, consecutively, so its output
block stays in VMEM between the visits and each visit writes only its group's rows (a mask).
The items' groups and tiles come in by scalar prefetch: the index maps read them, so each item
fetches its own group's weight block. The grid has a static length (row tiles + groups - 1, the
most items there can be); the steps past the real items repeat the last item's last depth
blocks (no fetch: a block is fetched again only when its index changes) and compute nothing.

Several weights of one shape (a gated MLP's gate and up projections) run in one kernel: one f32
accumulator each, joined by `epilogue` into the output block once the depth steps are done.

render (grouped_render.py) copies these functions into the kernel file unchanged, with
blocks.py's helpers and the file's BLOCK_* tunables; tests call them in interpret mode.
Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _fit_blocks,
    _mxu_dot,
    _pick_block,
)

# Preferred block sizes: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512
BLOCK_COLS = 512
BLOCK_DEPTH = 512


def _group_items(group_sizes, block_rows, items):
    """The work items of consecutive row groups over row tiles of `block_rows`: each item's
    group and row tile (padded to `items` by repeating the last), each group's first and
    one-past-last row, and how many items are real. A few hundred integers: XLA computes them
    before the kernel."""
    sizes = group_sizes.astype(jnp.int32)
    ends = jnp.cumsum(sizes)
    starts = ends - sizes
    first_tile = jax.lax.div(starts, block_rows)
    last_tile = jax.lax.div(jnp.maximum(ends - 1, 0), block_rows)
    tiles = jnp.where(sizes > 0, last_tile - first_tile + 1, 0)
    item_ends = jnp.cumsum(tiles)
    used = item_ends[-1]
    item = jnp.minimum(jnp.arange(items, dtype=jnp.int32), jnp.maximum(used - 1, 0))
    group = jnp.minimum(
        jnp.searchsorted(item_ends, item, side="right").astype(jnp.int32), sizes.shape[0] - 1
    )
    tile = first_tile[group] + item - (item_ends - tiles)[group]
    return group, tile, starts, ends, used.reshape(1)


def _grouped_kernel(
    groups_ref, tiles_ref, starts_ref, ends_ref, used_ref, lhs_ref, *refs, epilogue, operands
):
    """refs: the weights' blocks, the output block, one f32 accumulator per weight. At the last
    depth step, the rows of this item's group take the epilogue of the accumulators; the tile's
    other rows keep what an earlier group wrote there (zero on a tile's first visit)."""
    count = (len(refs) - 1) // 2
    weight_refs, out_ref, acc_refs = refs[:count], refs[count], refs[count + 1 :]
    item, depth = pl.program_id(1), pl.program_id(2)
    real = item < used_ref[0]

    @pl.when(depth == 0)
    def _zero():
        for acc_ref in acc_refs:
            acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(real)
    def _accumulate():
        lhs = lhs_ref[...]
        if operands == "bf16":  # cast once for every weight
            lhs = lhs.astype(jnp.bfloat16)
        for acc_ref, weight_ref in zip(acc_refs, weight_refs):
            acc_ref[...] += _mxu_dot(lhs, weight_ref[...], operands)

    @pl.when(real & (depth == pl.num_programs(2) - 1))
    def _store():
        group, tile = groups_ref[item], tiles_ref[item]
        block_rows = out_ref.shape[0]
        rows = tile * block_rows + jax.lax.broadcasted_iota(jnp.int32, out_ref.shape, 0)
        mine = (rows >= starts_ref[group]) & (rows < ends_ref[group])
        previous = tiles_ref[jnp.maximum(item - 1, 0)]
        revisit = (item > 0) & (previous == tile)
        kept = jnp.where(revisit, out_ref[...], jnp.zeros_like(out_ref))
        result = epilogue(*(acc_ref[...] for acc_ref in acc_refs)).astype(out_ref.dtype)
        out_ref[...] = jnp.where(mine, result, kept)


def _first_accumulator(acc, *others):
    """The plain grouped matmul's epilogue: the one product as it is."""
    return acc


def _grouped_matmul(
    lhs, weights, group_sizes, *, out_dtype, epilogue=_first_accumulator, operands=None
):
    """lhs (rows, depth) in consecutive groups; each of `weights` (groups, depth, cols). The
    output (rows, cols) is `epilogue` of the f32 products, in `out_dtype`. `operands`: how
    the MXU takes f32 blocks (blocks._mxu_dot)."""
    rows, depth = lhs.shape
    groups, _, cols = weights[0].shape
    row_align = 8 * max(1, 4 // jnp.dtype(lhs.dtype).itemsize)
    tm = min(BLOCK_ROWS, -(-rows // row_align) * row_align)
    tn = _pick_block(cols, BLOCK_COLS, 128)
    tk = _pick_block(depth, BLOCK_DEPTH, 128)

    def footprint(tm, tk):
        blocks = _block_bytes(tm, tk, lhs.dtype) + sum(
            _block_bytes(tk, tn, w.dtype) for w in weights
        )
        return 2 * (blocks + _block_bytes(tm, tn, out_dtype)) + len(weights) * _block_bytes(
            tm, tn, jnp.float32
        )

    tm, tk = _fit_blocks(rows, depth, tm, tk, row_align, footprint)
    padded = -(-rows // tm) * tm
    if padded != rows:  # whole row tiles: the rows past the groups are never written
        lhs = jnp.pad(lhs, ((0, padded - rows), (0, 0)))
    items = padded // tm + groups - 1
    metadata = _group_items(group_sizes, tm, items)

    depth_steps = depth // tk

    def item_depth(i, k, used_ref):
        """The depth block item i reads at step k; the padding steps past the real items stay
        on the last item's last block, so they fetch nothing."""
        return jnp.where(i < used_ref[0], k, depth_steps - 1)

    def lhs_block(j, i, k, groups_ref, tiles_ref, starts_ref, ends_ref, used_ref):
        return tiles_ref[i], item_depth(i, k, used_ref)

    def weight_block(j, i, k, groups_ref, tiles_ref, starts_ref, ends_ref, used_ref):
        return groups_ref[i], item_depth(i, k, used_ref), j

    def out_block(j, i, k, groups_ref, tiles_ref, *_):
        return tiles_ref[i], j

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=len(metadata),
        grid=(cols // tn, items, depth_steps),
        in_specs=[pl.BlockSpec((tm, tk), lhs_block)]
        + [pl.BlockSpec((None, tk, tn), weight_block) for _ in weights],
        out_specs=pl.BlockSpec((tm, tn), out_block),
        scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32) for _ in weights],
    )
    out = pl.pallas_call(
        functools.partial(_grouped_kernel, epilogue=epilogue, operands=operands),
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((padded, cols), out_dtype),
        compiler_params=_compiler_params(("parallel", "arbitrary", "arbitrary"), footprint(tm, tk)),
    )(*metadata, lhs, *weights)
    return out[:rows] if padded != rows else out
