"""A matmul whose row-wise epilogue runs across column blocks with running statistics, in the
manner of flash attention's running max and sum: the rows' sums, maxima, minima, picked
elements and rescaled sums of exponentials are carried from one column block to the next in
f32 VMEM scratch, so neither the matmul's result nor a block of whole rows ever has to exist.

The grid is (row blocks, column blocks, depth steps); column blocks and depth steps are both
'arbitrary' (the statistics and the accumulator carry across them). At the last depth step of
every column block the epilogue folds the finished (tm, tn) block into the statistics and
returns its finishing step, which runs once the last column block is in and writes the row
results. The epilogue, translated from the reference's jaxpr (agents/builtin/running.py), is a
function of the accumulator, the stage's other refs, its output refs and the statistics.

render.py copies these functions into each kernel file unchanged, with matmul.py's block maps
and product, blocks.py's helpers and the file's BLOCK_* tunables, and calls
`_running_matmul_stage`; tests call them directly in interpret mode. Imports jax.
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
    _pick_block,
)
from maxkernel_tui.agents.builtin.pieces.matmul import (
    _accumulate_products,
    _blocks_bytes,
    _role_block,
)

# Preferred block sizes: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512
BLOCK_COLS = 512
BLOCK_DEPTH = 512


def _running_kernel(*refs, epilogue, inputs, outputs, statistics, rhs_transposed, operands, tn):
    """refs: lhs, rhs, the epilogue's `inputs - 2` input refs, its `outputs` output refs, one
    (tm, 1) f32 scratch per statistic (`statistics`: their initial values), the accumulator."""
    lhs_ref, rhs_ref, acc_ref = refs[0], refs[1], refs[-1]
    stat_refs = refs[inputs + outputs : -1]
    j, k = pl.program_id(1), pl.program_id(2)

    @pl.when(k == 0)
    def _zero_accumulator():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(jnp.logical_and(j == 0, k == 0))
    def _start_statistics():
        for stat_ref, initial in zip(stat_refs, statistics):
            stat_ref[...] = jnp.full(stat_ref.shape, initial, jnp.float32)

    _accumulate_products((acc_ref,), lhs_ref, (rhs_ref,), rhs_transposed, operands)

    @pl.when(k == pl.num_programs(2) - 1)
    def _fold_block():
        finish = epilogue(acc_ref, *refs[2 : inputs + outputs], *stat_refs, col=j * tn)
        pl.when(j == pl.num_programs(1) - 1)(finish)


def _running_matmul_stage(
    lhs,
    rhs,
    *others,
    roles,
    outputs,
    epilogue,
    statistics,
    rhs_transposed=False,
    operands=None,
    row_align=8,
    col_align=128,
    temporaries=1,
):
    """One matmul stage, lhs (rows, depth) times rhs (depth, cols), or (cols, depth) when
    `rhs_transposed`, with a row-wise epilogue carried across column blocks:
    `epilogue(acc_ref, *other_refs, *out_refs, *stat_refs, col=, tm=, tn=, cols=)` folds one
    block (its first column is `col`) into the statistics and returns the finishing step.
    roles: the role of each of `others` (tile, row, col, scalar); outputs: (role, dtype) of each
    row result; statistics: the initial value of each f32 (tm, 1) statistic. `col_align`: the
    column block is a multiple of it (groups of columns stay whole). `temporaries`: f32
    (tm, tn) values besides the blocks, for the VMEM estimate."""
    rows, depth = lhs.shape
    cols = rhs.shape[0] if rhs_transposed else rhs.shape[1]
    tm = _pick_block(rows, BLOCK_ROWS, row_align)
    tn = _pick_block(cols, BLOCK_COLS, col_align)
    tk = _pick_block(depth, BLOCK_DEPTH, 128)
    in_roles = ["lhs", "rhs_t" if rhs_transposed else "rhs", *roles]

    def footprint(tm, tk):
        # Two buffers per pipelined block, the accumulator, its temporaries and the statistics.
        blocks = _blocks_bytes(in_roles, (lhs, rhs, *others), outputs, tm, tn, tk)
        scratch = len(statistics) * _block_bytes(tm, 1, jnp.float32)
        return 2 * blocks + temporaries * _block_bytes(tm, tn, jnp.float32) + scratch

    tm, tk = _fit_blocks(rows, depth, tm, tk, row_align, footprint)
    sizes = {"row": (rows, 1), "scalar": (1, 1)}
    kernel = functools.partial(
        _running_kernel,
        epilogue=functools.partial(epilogue, tm=tm, tn=tn, cols=cols),
        inputs=len(in_roles),
        outputs=len(outputs),
        statistics=statistics,
        rhs_transposed=rhs_transposed,
        operands=operands,
        tn=tn,
    )
    results = pl.pallas_call(
        kernel,
        out_shape=[jax.ShapeDtypeStruct(sizes[role], dtype) for role, dtype in outputs],
        grid=(rows // tm, cols // tn, depth // tk),
        in_specs=[_role_block(role, False, False, tm, tn, tk) for role in in_roles],
        out_specs=[_role_block(role, False, False, tm, tn, tk) for role, _ in outputs],
        scratch_shapes=[
            *(pltpu.VMEM((tm, 1), jnp.float32) for _ in statistics),
            pltpu.VMEM((tm, tn), jnp.float32),
        ],
        compiler_params=_compiler_params(("parallel", "arbitrary", "arbitrary"), footprint(tm, tk)),
    )(lhs, rhs, *others)
    return results[0] if len(results) == 1 else results
