"""An output every grid step adds into, beside one whose block changes every step (tiles/classes.py
visits): a backward kernel's dscale summed over every row block while it writes each block's dx
(1t's RMSNorm backward). The steps that keep the summed block resident are one visit, so the
sample runs them together and decides the sum; cut at every step (the old rule: a new visit
wherever any output's block changes) the sum was never decided. A sum that skips its own zeroing
is still caught (poisoned where the visit begins), a row block read before it is written inside
the visit is rejected, and a resident run longer than the sample may
take falls back to a visit per step, leaving the sum undecided rather than claimed. In-process
jax, small grids (seconds)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles import classes, poison
from maxkernel_tui.kernels.evaluation.tiles.sampled_run import KernelFault, run_sampled
from tests.support.placed_tiles import placed

PARAMS = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
STEPS, ROWS, WIDTH = 16, 8, 128


def _rows_and_sum(x_ref, dy_ref, dx_ref, total_ref):
    """Honest: each row block's own product, and the column sum over every row block."""

    @pl.when(pl.program_id(0) == 0)
    def _start():
        total_ref[...] = jnp.zeros_like(total_ref)

    product = x_ref[...] * dy_ref[...]
    dx_ref[...] = product * 2.0
    total_ref[...] += jnp.sum(product, axis=0, keepdims=True)


def _sum_never_zeroed(x_ref, dy_ref, dx_ref, total_ref):
    """Adds into whatever the summed block held before the first step."""
    product = x_ref[...] * dy_ref[...]
    dx_ref[...] = product * 2.0
    total_ref[...] += jnp.sum(product, axis=0, keepdims=True)


def _rows_never_written_first(x_ref, dy_ref, dx_ref, total_ref):
    """Zeroes the sum, but adds each row block's product into whatever its dx block held: the
    blocks after the visit's first are not poisoned by the sample, and must still not pass."""

    @pl.when(pl.program_id(0) == 0)
    def _start():
        total_ref[...] = jnp.zeros_like(total_ref)

    product = x_ref[...] * dy_ref[...]
    dx_ref[...] += product * 2.0
    total_ref[...] += jnp.sum(product, axis=0, keepdims=True)


def _program(body):
    def program(x, dy):
        return pl.pallas_call(
            body,
            grid=(STEPS,),
            in_specs=[pl.BlockSpec((ROWS, WIDTH), lambda i: (i, 0))] * 2,
            out_specs=(
                pl.BlockSpec((ROWS, WIDTH), lambda i: (i, 0)),
                pl.BlockSpec((1, WIDTH), lambda i: (0, 0)),
            ),
            out_shape=(
                jax.ShapeDtypeStruct((STEPS * ROWS, WIDTH), jnp.float32),
                jax.ShapeDtypeStruct((1, WIDTH), jnp.float32),
            ),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        )(x, dy)

    keys = jax.random.split(jax.random.key(7), 2)
    inputs = [jax.random.normal(k, (STEPS * ROWS, WIDTH), jnp.float32) for k in keys]
    return program, inputs


def _sampled(body, seed):
    program, inputs = _program(body)
    sampled = run_sampled(
        jax.make_jaxpr(program)(*inputs),
        inputs,
        np.random.default_rng(seed),
        random_blocks=2,
        params=PARAMS,
    )
    x, dy = (np.asarray(v) for v in inputs)
    return sampled, x * dy


def test_visits_run_while_any_output_keeps_its_block():
    rows = np.arange(STEPS).reshape(STEPS, 1, 1)
    summed = np.zeros((STEPS, 1, 2), np.int64)
    visits = classes._visits([rows, summed], (STEPS,), (0,))
    assert visits.tolist() == [0] * STEPS
    # one output changes block every 4 steps, the other at step 8 only: two visits, cut where
    # both change
    quarters = (np.arange(STEPS) // 4).reshape(STEPS, 1, 1)
    halves = (np.arange(STEPS) // 8).reshape(STEPS, 1, 1)
    assert classes._visits([quarters, halves], (STEPS,), (0,)).tolist() == [0] * 8 + [1] * 8
    # every output changes block at every step: a visit each, as before
    assert classes._visits([rows, rows], (STEPS,), (0,)).tolist() == list(range(STEPS))


@pytest.mark.parametrize("seed", range(3))
def test_a_sum_over_every_row_block_is_decided_beside_the_rows(seed, monkeypatch):
    """No prefixes to fall back on (budget 0): the one visit runs whole, the sum is decided in
    full and exact, and the rows too."""
    monkeypatch.setattr(poison, "PREFIX_STEPS", 0)
    sampled, product = _sampled(_rows_and_sum, seed)
    (kernel,) = sampled.kernels
    assert len(kernel.ran) == STEPS
    rows_decided, rows = placed(sampled.decided[0])
    sum_decided, total = placed(sampled.decided[1])
    assert sum_decided.all() and rows_decided.all()
    np.testing.assert_allclose(total[0], product.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rows, product * 2.0, rtol=1e-6)


def test_a_sum_that_is_never_zeroed_reads_poison_where_its_visit_begins(monkeypatch):
    """The summed block is poisoned (NaN in the natural run's uninitialised memory too) where
    its visit begins: a kernel that adds into it without zeroing it first gives no number the
    reference could match, so the harness rejects it; the rows stay exact."""
    monkeypatch.setattr(poison, "PREFIX_STEPS", 0)
    sampled, product = _sampled(_sum_never_zeroed, 0)
    sum_decided, total = placed(sampled.decided[1])
    assert sum_decided.all() and not np.isfinite(total).any()
    rows_decided, rows = placed(sampled.decided[0])
    np.testing.assert_allclose(rows[rows_decided], (product * 2.0)[rows_decided], rtol=1e-6)


def test_a_resident_run_longer_than_the_sample_may_take_is_cut_and_never_claims_a_wrong_sum(
    monkeypatch,
):
    """Past WHOLE_GRID points the visits are cut at every block change; the sum is then carried
    state, run on the prefixes the sample needs (or refused), and what is decided is exact."""
    monkeypatch.setattr(classes, "WHOLE_GRID", STEPS // 2)
    rows = np.arange(STEPS).reshape(STEPS, 1, 1)
    summed = np.zeros((STEPS, 1, 2), np.int64)
    assert classes._visits([rows, summed], (STEPS,), (0,)).tolist() == list(range(STEPS))
    sampled, product = _sampled(_rows_and_sum, 1)
    rows_decided, rows_out = placed(sampled.decided[0])
    sum_decided, total = placed(sampled.decided[1])
    assert rows_decided.any()
    np.testing.assert_allclose(rows_out[rows_decided], (product * 2.0)[rows_decided], rtol=1e-6)
    expected = product.sum(axis=0, keepdims=True)
    np.testing.assert_allclose(total[sum_decided], expected[sum_decided], rtol=1e-5, atol=1e-5)


def test_rows_read_before_written_inside_a_visit_are_rejected():
    """Inside one visit only its first step is poisoned; a dx block read before it is written
    at a later step reads unwritten memory, which differs between the poisoned and the natural
    run: rejected as state carried from one output block to the next."""
    with pytest.raises(KernelFault, match="differs when it started from"):
        _sampled(_rows_never_written_first, 2)
