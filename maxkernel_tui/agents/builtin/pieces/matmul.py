"""The matmul stage of the kernels the built-in agent writes: one parameterised kernel and its
wrapper, in the manner of jax's pallas/ops/tpu/matmul.py. Trace-time `if`s choose what a
stage needs (a weight stored (cols, depth), bf16 operands, full f32 passes, a batch axis, a
block spanning every column); the epilogue, translated from the reference's jaxpr, comes in as
a function of the finished f32 accumulator and the stage's other refs.

render.py copies these functions into each kernel file unchanged, with the helpers of
blocks.py and the file's BLOCK_* tunables, and calls `_matmul_stage` with the stage's
parameters; tests call them directly in interpret mode. Imports jax.
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


def _accumulate_products(acc_refs, lhs_ref, rhs_refs, rhs_transposed, operands):
    """acc += lhs @ rhs for one depth step and each weight, in f32, its f32 operands taken as
    `operands` says (blocks._mxu_dot); the block of rows is loaded once for every weight."""
    # the weight stored (cols, depth) when rhs_transposed: both contracted on their last axis
    contracting = ((1,), (1,)) if rhs_transposed else ((1,), (0,))
    lhs = lhs_ref[...]
    for acc_ref, rhs_ref in zip(acc_refs, rhs_refs):
        acc_ref[...] += _mxu_dot(lhs, rhs_ref[...], operands, contracting)


def _matmul_kernel(
    *refs,
    epilogue,
    inputs,
    rhs_transposed,
    operands,
    batched,
    in_place=None,
    chunk=None,
    sliced=(),
    siblings=0,
):
    """Accumulate lhs @ rhs over depth steps in f32, then run the epilogue once per output
    block. refs: lhs, rhs, `siblings` more weights of the same shape, the epilogue's input refs
    (`inputs` counts every input), its output refs, and an accumulator scratch per weight,
    unless `in_place` (the index of an f32 tile output, no siblings) accumulates in that
    output's block. `operands`: how the matmuls take f32 operands (blocks._mxu_dot). `chunk`:
    the epilogue runs on that many rows at a time (its temporaries stay small on wide rows);
    `sliced` says which of the epilogue's refs are tiled along rows."""
    lhs_ref, rhs_refs = refs[0], refs[1 : 2 + siblings]
    if in_place is None:
        acc_refs, others = refs[len(refs) - 1 - siblings :], refs[2 + siblings : -1 - siblings]
    else:
        acc_refs, others = (refs[inputs + in_place],), refs[2:]
    depth_axis = 3 if batched else 2
    k = pl.program_id(depth_axis)

    @pl.when(k == 0)
    def _zero_accumulators():
        for acc_ref in acc_refs:
            acc_ref[...] = jnp.zeros_like(acc_ref)

    _accumulate_products(acc_refs, lhs_ref, rhs_refs, rhs_transposed, operands)

    @pl.when(k == pl.num_programs(depth_axis) - 1)
    def _epilogue():
        if chunk is None:
            epilogue(*acc_refs, *others)
            return

        def one_chunk(c, carry):
            rows = pl.ds(pl.multiple_of(c * chunk, chunk), chunk)
            views = [ref.at[rows] if tiled else ref for ref, tiled in zip(others, sliced)]
            epilogue(*(acc_ref.at[rows] for acc_ref in acc_refs), *views)
            return carry

        jax.lax.fori_loop(0, acc_refs[0].shape[0] // chunk, one_chunk, 0)


def _lhs_block(i, j, k):
    """Row block i of the left operand, depth step k."""
    return i, k


def _rhs_block(i, j, k):
    """Depth step k, column block j of a (depth, cols) weight."""
    return k, j


def _rhs_t_block(i, j, k):
    """Column block j, depth step k of a weight stored (cols, depth)."""
    return j, k


def _tile_block(i, j, k):
    """Tile (i, j): row block i, column block j."""
    return i, j


def _row_block(i, j, k):
    """One value per row: row block i."""
    return i, 0


def _col_block(i, j, k):
    """One value per column: column block j."""
    return 0, j


def _scalar_block(i, j, k):
    """A single value, the same block at every step."""
    return 0, 0


def _role_block(role, batched, batched_grid, tm, tn, tk):
    """The BlockSpec of an operand by its role: lhs (rows, depth), rhs (depth, cols), rhs_t
    (cols, depth), tile (rows, cols), row (rows, 1), col (1, cols), scalar (1, 1); `batched`
    operands carry the grid's batch axis in front."""
    shape, index = {
        "lhs": ((tm, tk), _lhs_block),
        "rhs": ((tk, tn), _rhs_block),
        "rhs_t": ((tn, tk), _rhs_t_block),
        "tile": ((tm, tn), _tile_block),
        "row": ((tm, 1), _row_block),
        "col": ((1, tn), _col_block),
        "scalar": ((1, 1), _scalar_block),
    }[role]
    if not batched_grid:
        return pl.BlockSpec(shape, index)

    def per_entry(b, i, j, k):
        """The block of batch entry b."""
        return (b, *index(i, j, k))

    def shared(b, i, j, k):
        """The same block for every batch entry."""
        return index(i, j, k)

    return pl.BlockSpec((None, *shape), per_entry) if batched else pl.BlockSpec(shape, shared)


def _role_bytes(role, tm, tn, tk, dtype):
    rows, cols = {
        "lhs": (tm, tk),
        "rhs": (tk, tn),
        "rhs_t": (tn, tk),
        "tile": (tm, tn),
        "row": (tm, 1),
        "col": (1, tn),
        "scalar": (1, 1),
    }[role]
    return _block_bytes(rows, cols, dtype)


def _blocks_bytes(in_roles, arrays, outputs, tm, tn, tk):
    """VMEM bytes of one buffer of every pipelined block: the inputs by role and dtype, and the
    outputs' (role, dtype)."""
    return sum(
        _role_bytes(role, tm, tn, tk, array.dtype) for role, array in zip(in_roles, arrays)
    ) + sum(_role_bytes(role, tm, tn, tk, dtype) for role, dtype in outputs)


def _matmul_stage(
    lhs,
    rhs,
    *others,
    roles,
    outputs,
    epilogue,
    rhs_transposed=False,
    operands=None,
    batched=(),
    full_cols=False,
    row_align=8,
    temporaries=1,
    epilogue_rows=32,
    siblings=0,
):
    """One matmul stage: lhs (batch?, rows, depth) times rhs (batch?, depth, cols), or (batch?,
    cols, depth) when `rhs_transposed`, then `epilogue(acc_ref, *other_refs, *out_refs, tm=,
    tn=)`. `siblings`: the first that many of `others` are more weights like rhs, each summed
    in its own accumulator, which the epilogue receives after acc_ref. roles: the role of each
    of the other `others`; outputs: (role, dtype) of each result;
    batched: whether each operand (lhs, rhs, others, outputs, in order) has the batch axis,
    empty for an unbatched grid. `full_cols`: a block spans every column (the epilogue reduces
    over them). `temporaries`: f32 (tm, tn) values besides the blocks (the accumulator among
    them), for the VMEM estimate."""
    batched_grid = bool(batched)
    flags = list(batched) or [False] * (2 + len(others) + len(outputs))
    *lead, rows, depth = lhs.shape
    cols = rhs.shape[-2] if rhs_transposed else rhs.shape[-1]
    tm = _pick_block(rows, BLOCK_ROWS, row_align)
    tn = cols if full_cols else _pick_block(cols, BLOCK_COLS, 128)
    tk = _pick_block(depth, BLOCK_DEPTH, 128)
    in_roles = ["lhs", *["rhs_t" if rhs_transposed else "rhs"] * (1 + siblings), *roles]

    # Whole rows: the sum accumulates in its f32 output block when there is one, and the
    # epilogue runs on `epilogue_rows` rows at a time, so wide rows still fit large row blocks.
    wide = full_cols and not batched_grid
    f32_tiles = [
        n
        for n, (role, dtype) in enumerate(outputs)
        if role == "tile" and jnp.dtype(dtype) == jnp.float32
    ]
    in_place = f32_tiles[0] if wide and f32_tiles and not siblings else None

    def chunk_rows(tm):
        return _pick_block(tm, epilogue_rows, row_align) if wide else tm

    def footprint(tm, tk):
        # Two buffers per pipelined block, the f32 accumulator and the epilogue's temporaries.
        blocks = _blocks_bytes(in_roles, (lhs, rhs, *others), outputs, tm, tn, tk)
        accumulators = 0 if in_place is not None else 1 + siblings
        accumulator = accumulators * _block_bytes(tm, tn, jnp.float32)
        live = (temporaries - 1) * _block_bytes(chunk_rows(tm), tn, jnp.float32)
        return 2 * blocks + accumulator + live

    tm, tk = _fit_blocks(rows, depth, tm, tk, row_align, footprint, 128 if wide else 256)
    chunk = chunk_rows(tm)
    row_roles = ("tile", "row")
    sliced = [role in row_roles for role in (*roles, *(role for role, _ in outputs))]
    sizes = {"tile": (rows, cols), "row": (rows, 1), "col": (1, cols), "scalar": (1, 1)}
    out_flags = flags[len(in_roles) :]
    grid = (rows // tm, cols // tn, depth // tk)
    semantics = ("parallel", "parallel", "arbitrary")
    if batched_grid:
        grid, semantics = (lead[0], *grid), ("parallel", *semantics)
    kernel = functools.partial(
        _matmul_kernel,
        epilogue=functools.partial(epilogue, tm=chunk, tn=tn),
        inputs=len(in_roles),
        rhs_transposed=rhs_transposed,
        operands=operands,
        batched=batched_grid,
        in_place=in_place,
        chunk=chunk if chunk < tm else None,
        sliced=sliced,
        siblings=siblings,
    )
    out_shape = [
        jax.ShapeDtypeStruct((*lead, *sizes[role]) if flag else sizes[role], dtype)
        for (role, dtype), flag in zip(outputs, out_flags)
    ]
    results = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=grid,
        in_specs=[
            _role_block(role, flag, batched_grid, tm, tn, tk) for role, flag in zip(in_roles, flags)
        ],
        out_specs=[
            _role_block(role, flag, batched_grid, tm, tn, tk)
            for (role, _), flag in zip(outputs, out_flags)
        ],
        scratch_shapes=[]
        if in_place is not None
        else [pltpu.VMEM((tm, tn), jnp.float32) for _ in range(1 + siblings)],
        compiler_params=_compiler_params(semantics, footprint(tm, tk)),
    )(lhs, rhs, *others)
    return results[0] if len(results) == 1 else results
