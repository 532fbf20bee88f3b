"""The row-wise stage of the kernels the built-in agent writes: element-wise and row-wise
equations of the reference on 2-D blocks, one parameterised wrapper. A block is (tm, tn), or
(tm, every column) when the body reduces over the columns or reads groups of them; the body,
translated from the reference's jaxpr, comes in as a function of the stage's refs.

With `accumulators` the same wrapper runs a column reduction (batch statistics, a mean over
tokens): the grid puts row blocks innermost and 'arbitrary', each adds its partial result to
f32 scratch, and the body's finishing step runs once the last row block is in.

render.py copies these functions into each kernel file unchanged (with blocks.py's helpers and
the file's BLOCK_* tunables) and calls `_rowwise_stage` with the stage's parameters; tests call
them directly in interpret mode. Imports jax.
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
    _fit_rows,
    _pick_block,
)

# Preferred block sizes: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512
BLOCK_COLS = 512


def _tile_block_2d(i, j):
    """Tile (i, j): row block i, column block j."""
    return i, j


def _row_block_2d(i, j):
    """One value per row: row block i."""
    return i, 0


def _col_block_2d(i, j):
    """One value per column: column block j."""
    return 0, j


def _scalar_block_2d(i, j):
    """A single value, the same block at every step."""
    return 0, 0


def _rowwise_block(role, tm, tn):
    """(block shape, index map) of an operand by its role: tile (rows, cols), row (rows, 1),
    col (1, cols) or scalar (1, 1)."""
    return {
        "tile": ((tm, tn), _tile_block_2d),
        "row": ((tm, 1), _row_block_2d),
        "col": ((1, tn), _col_block_2d),
        "scalar": ((1, 1), _scalar_block_2d),
    }[role]


def _rows_inner(index):
    """The same block on a grid (j, i) whose row blocks are the inner axis."""

    def swapped(j, i):
        return index(i, j)

    return swapped


def _column_reduction_kernel(*refs, body, accumulators):
    """Reductions over rows: `body` adds this row block's partial results to the f32
    accumulators (the last refs) and returns its finishing step, run after the last row block.
    accumulators: (role, initial value) of each."""
    i = pl.program_id(1)

    @pl.when(i == 0)
    def _start():
        for acc_ref, (_, initial) in zip(refs[-len(accumulators) :], accumulators):
            acc_ref[...] = jnp.full(acc_ref.shape, initial, jnp.float32)

    finish = body(*refs)
    pl.when(i == pl.num_programs(1) - 1)(finish)


def _rowwise_stage(
    *operands,
    rows,
    cols,
    roles,
    outputs,
    body,
    accumulators=(),
    full_cols=False,
    row_align=8,
    temporaries=0,
    batched=None,
):
    """One row-wise stage over a (rows, cols) frame: `body(*operand_refs, *out_refs, tm=, tn=)`
    on each block. roles: the role of each operand (see _rowwise_block); outputs: (role, dtype)
    of each result. `accumulators`: (role, initial value) of each f32 scratch of a column
    reduction, whose body also takes their refs and returns its finishing step. `full_cols`: a
    block spans every column. `temporaries`: f32 (tm, tn) values the body makes, for the VMEM
    estimate. `batched`: whether each operand and result has a leading image axis (a
    convolution's output and what follows it); the grid then walks the images too, innermost
    and 'arbitrary' when the accumulators sum over them (batch statistics)."""
    if batched is not None:
        return _batched_rowwise_stage(
            *operands,
            rows=rows,
            cols=cols,
            roles=roles,
            outputs=outputs,
            body=body,
            accumulators=accumulators,
            row_align=row_align,
            temporaries=temporaries,
            batched=batched,
        )
    all_roles = [*roles, *(role for role, _ in outputs)]
    tm = _pick_block(rows, BLOCK_ROWS, row_align)
    tiled = any(role in ("tile", "col") for role in all_roles)
    tn = _pick_block(cols, BLOCK_COLS, 128) if tiled and not full_cols else cols
    dtypes = [*(array.dtype for array in operands), *(dtype for _, dtype in outputs)]

    def footprint(tm):
        # Two buffers per pipelined block, plus the body's f32 tile temporaries.
        blocks = sum(
            _block_bytes(*_rowwise_block(role, tm, tn)[0], dtype)
            for role, dtype in zip(all_roles, dtypes)
        )
        scratch = sum(
            _block_bytes(*_rowwise_block(role, tm, tn)[0], jnp.float32) for role, _ in accumulators
        )
        return 2 * blocks + temporaries * _block_bytes(tm, tn, jnp.float32) + scratch

    tm = _fit_rows(rows, tm, row_align, footprint)
    sizes = {"tile": (rows, cols), "row": (rows, 1), "col": (1, cols), "scalar": (1, 1)}
    kernel = functools.partial(body, tm=tm, tn=tn)
    grid, semantics = (rows // tm, cols // tn), ("parallel", "parallel")

    def spec(role):
        shape, index = _rowwise_block(role, tm, tn)
        return pl.BlockSpec(shape, _rows_inner(index) if accumulators else index)

    if accumulators:  # row blocks innermost: each adds to the scratch the next one reads
        kernel = functools.partial(_column_reduction_kernel, body=kernel, accumulators=accumulators)
        grid, semantics = (cols // tn, rows // tm), ("parallel", "arbitrary")
    results = pl.pallas_call(
        kernel,
        out_shape=[jax.ShapeDtypeStruct(sizes[role], dtype) for role, dtype in outputs],
        grid=grid,
        in_specs=[spec(role) for role in roles],
        out_specs=[spec(role) for role, _ in outputs],
        scratch_shapes=[
            pltpu.VMEM(_rowwise_block(role, tm, tn)[0], jnp.float32) for role, _ in accumulators
        ],
        compiler_params=_compiler_params(semantics, footprint(tm)),
    )(*operands)
    return results[0] if len(results) == 1 else results


def _batched_rowwise_stage(
    *operands, rows, cols, roles, outputs, body, accumulators, row_align, temporaries, batched
):
    """`_rowwise_stage` over images: blocks of rows spanning every column, per image for the
    operands and results with the image axis, shared by every image for the rest. With
    accumulators the images are the inner, 'arbitrary' axis: each adds its partial results, the
    finishing step runs after the last image."""
    images = next(a.shape[0] for a, flag in zip(operands, batched) if flag)
    all_roles = [*roles, *(role for role, _ in outputs)]
    dtypes = [*(array.dtype for array in operands), *(dtype for _, dtype in outputs)]

    def footprint(tm):
        blocks = sum(
            _block_bytes(*_rowwise_block(role, tm, cols)[0], dtype)
            for role, dtype in zip(all_roles, dtypes)
        )
        scratch = len(accumulators) * _block_bytes(tm, cols, jnp.float32)
        return 2 * blocks + temporaries * _block_bytes(tm, cols, jnp.float32) + scratch

    tm = _fit_rows(rows, _pick_block(rows, BLOCK_ROWS, row_align), row_align, footprint)
    kernel = functools.partial(body, tm=tm, tn=cols)
    if accumulators:
        kernel = functools.partial(_column_reduction_kernel, body=kernel, accumulators=accumulators)
        grid, semantics = (rows // tm, images), ("parallel", "arbitrary")
    else:
        grid, semantics = (images, rows // tm), ("parallel", "parallel")

    def spec(role, flag):
        shape, index = _rowwise_block(role, tm, cols)

        def per_image(*ids):
            """Block (image, row block) of an operand with the image axis."""
            b, i = (ids[1], ids[0]) if accumulators else ids
            return (b, *index(i, 0))

        def shared(*ids):
            """The row block of an operand every image shares."""
            return index(ids[0] if accumulators else ids[1], 0)

        return pl.BlockSpec((None, *shape), per_image) if flag else pl.BlockSpec(shape, shared)

    sizes = {"tile": (rows, cols), "row": (rows, 1), "col": (1, cols), "scalar": (1, 1)}
    in_flags, out_flags = batched[: len(operands)], batched[len(operands) :]
    results = pl.pallas_call(
        kernel,
        out_shape=[
            jax.ShapeDtypeStruct((images, *sizes[role]) if flag else sizes[role], dtype)
            for (role, dtype), flag in zip(outputs, out_flags)
        ],
        grid=grid,
        in_specs=[spec(role, flag) for role, flag in zip(roles, in_flags)],
        out_specs=[spec(role, flag) for (role, _), flag in zip(outputs, out_flags)],
        scratch_shapes=[
            pltpu.VMEM(_rowwise_block(role, tm, cols)[0], jnp.float32) for role, _ in accumulators
        ],
        compiler_params=_compiler_params(semantics, footprint(tm)),
    )(*operands)
    return results[0] if len(results) == 1 else results
