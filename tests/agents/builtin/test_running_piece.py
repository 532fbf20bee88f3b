"""The running-statistics matmul (pieces/running.py) run directly in TPU interpret mode at small
shapes, against jnp: statistics carried across several column blocks and depth steps (a sum,
flash attention's running max with a rescaled sum of exponentials, and an element picked by
index from whichever column block holds it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import running

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks smaller than the arrays: several row, column and depth steps."""
    monkeypatch.setattr(running, "BLOCK_ROWS", 16)
    monkeypatch.setattr(running, "BLOCK_COLS", 128)
    monkeypatch.setattr(running, "BLOCK_DEPTH", 128)


def _random(*shape, seed=0, scale=1.0):
    return scale * jax.random.normal(jax.random.key(seed), shape, jnp.float32)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(running._running_matmul_stage(*args, **kwargs))


def _dot(x, w):
    return jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST)


@pytest.mark.slow
def test_a_row_sum_of_sigmoids_is_carried_across_column_blocks():
    x, w, b = _random(32, 256), _random(256, 512, seed=1), _random(1, 512, seed=2)

    def epilogue(acc_ref, b_ref, out_ref, sum_ref, *, col, tm, tn, cols):
        y = jax.nn.sigmoid(acc_ref[...] + b_ref[...])
        sum_ref[...] = sum_ref[...] + jnp.sum(y, axis=1, keepdims=True)

        def finish():
            out_ref[...] = sum_ref[...] * 0.5

        return finish

    got = _run(
        x,
        w,
        b,
        roles=("col",),
        outputs=(("row", jnp.float32),),
        epilogue=epilogue,
        statistics=(0.0,),
        operands="highest",
    )
    want = 0.5 * jnp.sum(jax.nn.sigmoid(_dot(x, w) + b), axis=1, keepdims=True)
    assert got.shape == (32, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_a_logsumexp_rescales_its_running_sum_when_the_running_max_grows():
    # Later column blocks hold larger values, so the running max grows block by block.
    x, w_t = _random(32, 256), _random(512, 256, seed=1, scale=0.3)
    w_t = w_t + jnp.linspace(0.0, 0.2, 512)[:, None]

    def epilogue(acc_ref, out_ref, max_ref, sum_ref, *, col, tm, tn, cols):
        y = acc_ref[...]
        old = max_ref[...]
        new = jnp.maximum(old, jnp.max(y, axis=1, keepdims=True))
        max_ref[...] = new
        kept = sum_ref[...]
        kept = jnp.where(kept == 0, 0.0, kept * jnp.exp(old - new))
        sum_ref[...] = kept + jnp.sum(jnp.exp(y - new), axis=1, keepdims=True)

        def finish():
            out_ref[...] = jnp.log(sum_ref[...]) + max_ref[...]

        return finish

    got = _run(
        x,
        w_t,
        roles=(),
        outputs=(("row", jnp.float32),),
        epilogue=epilogue,
        statistics=(-jnp.inf, 0.0),
        rhs_transposed=True,
        operands="highest",
    )
    want = jax.nn.logsumexp(_dot(x, w_t.T), axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_an_element_picked_by_index_comes_from_the_column_block_that_holds_it():
    x, w = _random(32, 128), _random(128, 384, seed=1)
    index = jax.random.randint(jax.random.key(3), (32, 1), 0, 384)

    def epilogue(acc_ref, index_ref, out_ref, picked_ref, *, col, tm, tn, cols):
        position = jax.lax.broadcasted_iota(jnp.int32, (tm, tn), 1) + col
        hit = jnp.where(position == index_ref[...], acc_ref[...], 0.0)
        picked_ref[...] = picked_ref[...] + jnp.sum(hit, axis=1, keepdims=True)

        def finish():
            out_ref[...] = picked_ref[...]

        return finish

    got = _run(
        x,
        w,
        index,
        roles=("row",),
        outputs=(("row", jnp.float32),),
        epilogue=epilogue,
        statistics=(0.0,),
        operands="highest",
    )
    want = jnp.take_along_axis(_dot(x, w), index, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
