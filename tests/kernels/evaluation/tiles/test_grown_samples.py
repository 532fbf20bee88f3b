"""A kernel whose sample grows at run time (state carried in scratch along an `arbitrary` output
axis makes the sampled run take every block before the sampled ones) reads blocks of an earlier
kernel that the plan did not ask for: those read NaN in the provenance run, and what they write
is undecided. A row kernel saves each row's statistic; the next writes each row block plus the
running sum of every block before it (a prefix scan). (An output block summed over every step,
as an RMSNorm backward's dscale, is one resident visit the plan takes whole:
test_summed_visits.py.) In-process jax, small shapes (seconds)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles.sampled_run import run_sampled

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
ROWS, COLS, BLOCK = 24 * 8, 128, 8


def _statistic_kernel(x_ref, s_ref):
    s_ref[...] = jnp.sum(x_ref[...], axis=1, keepdims=True) + 1.0


def _running_rows_kernel(x_ref, s_ref, out_ref, carry_ref):
    @pl.when(pl.program_id(0) == 0)
    def _start():
        carry_ref[...] = jnp.zeros_like(carry_ref)

    scaled = x_ref[...] * s_ref[...]
    out_ref[...] = scaled + carry_ref[...]
    carry_ref[...] += jnp.sum(scaled, axis=0, keepdims=True)


def _program(x):
    rows = pl.BlockSpec((BLOCK, COLS), lambda i: (i, 0))
    column = pl.BlockSpec((BLOCK, 1), lambda i: (i, 0))
    statistic = pl.pallas_call(
        _statistic_kernel,
        grid=(ROWS // BLOCK,),
        in_specs=[rows],
        out_specs=column,
        out_shape=jax.ShapeDtypeStruct((ROWS, 1), jnp.float32),
    )(x)
    return pl.pallas_call(
        _running_rows_kernel,
        grid=(ROWS // BLOCK,),
        in_specs=[rows, column],
        out_specs=rows,
        out_shape=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        scratch_shapes=[pltpu.VMEM((1, COLS), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x, statistic)


@pytest.mark.slow
def test_blocks_a_grown_sample_adds_read_nothing_undecided_into_the_decided_outputs():
    x = jax.random.normal(jax.random.key(0), (ROWS, COLS), jnp.float32)
    closed = jax.make_jaxpr(_program)(x)
    sampled = run_sampled(closed, [x], np.random.default_rng(3), random_blocks=2, params=PARAMS)
    first, second = sampled.kernels
    # the earlier kernel ran the planned blocks only; the later one grew to every block
    assert first.blocks < first.of_blocks
    assert second.blocks == second.of_blocks
    (out,) = sampled.decided
    with pltpu.force_tpu_interpret_mode(PARAMS):
        want_out = np.asarray(_program(x)).reshape(-1)
    # what is decided is finite and right; what read an unplanned block is not decided
    assert 0 < out.indices.size < ROWS * COLS
    assert np.isfinite(out.values).all()
    np.testing.assert_allclose(out.values, want_out[out.indices], rtol=1e-5, atol=1e-5)
