"""Work under `pl.when` counts by the share of grid steps that take it when the condition is a
program of the grid indices alone (a causal mask's block test), and fully otherwise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from maxkernel_tui.kernels.perf.pallas_analysis import analyze

BLOCK, BLOCKS = 128, 4
BLOCK_FLOPS = 2.0 * BLOCK * BLOCK * BLOCK


def _causal_blocks_kernel(x_ref, y_ref, o_ref):
    """Query block i against key block j: on or below the diagonal only."""
    i, j = pl.program_id(0), pl.program_id(1)

    @pl.when(j == 0)
    def _zero():
        o_ref[...] = jnp.zeros_like(o_ref)

    @pl.when(j <= i)
    def _attend():
        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def _data_kernel(x_ref, o_ref):
    """A condition on data: the model cannot know how often it holds."""

    @pl.when(x_ref[0, 0] > 0)
    def _work():
        o_ref[...] = jnp.dot(x_ref[...], x_ref[...], preferred_element_type=jnp.float32)


def _analysis(kernel, grid, in_specs, out_spec, *inputs):
    def program(*args):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(out_spec[0], jnp.float32),
            grid=grid,
            in_specs=in_specs,
            out_specs=out_spec[1],
        )(*args)

    (found,) = analyze(jax.make_jaxpr(program)(*inputs))
    return found


def test_blocks_above_the_diagonal_are_not_counted():
    size = BLOCK * BLOCKS
    spec = jax.ShapeDtypeStruct((size, size), jnp.float32)
    found = _analysis(
        _causal_blocks_kernel,
        (BLOCKS, BLOCKS),
        [
            pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
            pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (j, 0)),
        ],
        ((size, BLOCK), pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, 0))),
        spec,
        jax.ShapeDtypeStruct((size, BLOCK), jnp.float32),
    )
    on_or_below = BLOCKS * (BLOCKS + 1) // 2  # 10 of the 16 steps
    assert found.mxu_flops_per_step == BLOCK_FLOPS * on_or_below / BLOCKS**2


def test_a_condition_on_data_counts_fully():
    spec = jax.ShapeDtypeStruct((BLOCK, BLOCK), jnp.float32)
    block = pl.BlockSpec((BLOCK, BLOCK), lambda i: (0, 0))
    found = _analysis(_data_kernel, (4,), [block], ((BLOCK, BLOCK), block), spec)
    assert found.mxu_flops_per_step == BLOCK_FLOPS
