"""A program whose output is a handful of numbers made from every block of a kernel (a mean of
each row's loss, 3t's cross-entropy forward): a sample of blocks decides none of it, so such a
program is planned on the whole of its outputs, every block run, where that is affordable
(tiles/pullback.py WHOLE_OUTPUT_STEPS). A kernel wrong in one row block only, which
a sample of a few blocks would miss, moves the decided mean. Past the budget the program is
sampled as before and its output left undecided. In-process jax, small grids (seconds)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles import pullback
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import run_sampled

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
ROW_BLOCKS, COL_BLOCKS, ROWS, COLS = 12, 3, 8, 128


def _row_logsumexp(x_ref, out_ref, max_ref, sum_ref):
    """Each row's logsumexp over the column blocks (running max and sum in scratch)."""
    column = pl.program_id(1)

    @pl.when(column == 0)
    def _start():
        max_ref[...] = jnp.full_like(max_ref, -jnp.inf)
        sum_ref[...] = jnp.zeros_like(sum_ref)

    x = x_ref[...]
    current = jnp.maximum(max_ref[...], jnp.max(x, axis=1, keepdims=True))
    sum_ref[...] = sum_ref[...] * jnp.exp(max_ref[...] - current) + jnp.sum(
        jnp.exp(x - current), axis=1, keepdims=True
    )
    max_ref[...] = current

    @pl.when(column == COL_BLOCKS - 1)
    def _finish():
        out_ref[...] = max_ref[...] + jnp.log(sum_ref[...])


def _off_in_block_seven(x_ref, out_ref, max_ref, sum_ref):
    _row_logsumexp(x_ref, out_ref, max_ref, sum_ref)

    @pl.when((pl.program_id(0) == 7) & (pl.program_id(1) == COL_BLOCKS - 1))
    def _off():
        out_ref[...] += 1.0


def _program(body):
    def program(x):
        rows = pl.pallas_call(
            body,
            grid=(ROW_BLOCKS, COL_BLOCKS),
            in_specs=[pl.BlockSpec((ROWS, COLS), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((ROWS, 1), lambda i, j: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((ROW_BLOCKS * ROWS, 1), jnp.float32),
            scratch_shapes=[pltpu.VMEM((ROWS, 1), jnp.float32)] * 2,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        )(x)
        return jnp.mean(rows)

    return program


def _sampled(body):
    x = jax.random.normal(jax.random.key(2), (ROW_BLOCKS * ROWS, COL_BLOCKS * COLS), jnp.float32)
    program = _program(body)
    sampled = run_sampled(
        jax.make_jaxpr(program)(x), [x], np.random.default_rng(5), random_blocks=2, params=PARAMS
    )
    with pltpu.force_tpu_interpret_mode(PARAMS):
        whole = float(program(x))
    return sampled, whole, np.asarray(x)


def test_a_mean_of_every_row_block_is_decided_by_running_every_block():
    sampled, whole, x = _sampled(_row_logsumexp)
    (kernel,) = sampled.kernels
    assert kernel.blocks == kernel.of_blocks == ROW_BLOCKS
    (mean,) = sampled.decided
    assert mean.indices.tolist() == [0]
    expected = np.mean(np.log(np.sum(np.exp(x.astype(np.float64)), axis=1)))
    np.testing.assert_allclose(mean.values[0], expected, rtol=1e-5)
    np.testing.assert_allclose(mean.values[0], whole, rtol=1e-6)


def test_a_kernel_wrong_in_one_row_block_moves_the_decided_mean():
    sampled, whole, x = _sampled(_off_in_block_seven)
    (mean,) = sampled.decided
    honest = np.mean(np.log(np.sum(np.exp(x.astype(np.float64)), axis=1)))
    np.testing.assert_allclose(mean.values[0], whole, rtol=1e-6)
    assert abs(mean.values[0] - honest) > 0.5 / ROW_BLOCKS


def test_past_the_budget_the_mean_is_sampled_as_before_and_left_undecided(monkeypatch):
    monkeypatch.setattr(pullback, "WHOLE_OUTPUT_STEPS", ROW_BLOCKS * COL_BLOCKS - 1)
    sampled, _, _ = _sampled(_row_logsumexp)
    (kernel,) = sampled.kernels
    assert kernel.blocks < kernel.of_blocks
    (mean,) = sampled.decided
    assert mean.indices.size == 0
