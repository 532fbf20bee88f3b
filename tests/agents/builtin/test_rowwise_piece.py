"""The row-wise stage's module (pieces/rowwise.py) run directly in TPU interpret mode at small
shapes, against jnp: an element-wise body on (tm, tn) tiles with a column operand, a body that
reduces over whole rows with a row result, and column reductions (`accumulators`) over several
row blocks, with f32 and bf16 inputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import rowwise

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks smaller than the arrays: several row and column steps."""
    monkeypatch.setattr(rowwise, "BLOCK_ROWS", 16)
    monkeypatch.setattr(rowwise, "BLOCK_COLS", 128)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(rowwise._rowwise_stage(*args, **kwargs))


def test_an_element_wise_body_on_tiles_with_a_column_operand():
    x = jax.random.normal(jax.random.key(0), (48, 384))
    scale = jax.random.normal(jax.random.key(1), (1, 384))

    def body(x_ref, scale_ref, out_ref, *, tm, tn):
        assert (tm, tn) == (16, 128)
        out_ref[...] = jnp.tanh(x_ref[...]) * scale_ref[...]

    got = _run(
        x,
        scale,
        rows=48,
        cols=384,
        roles=("tile", "col"),
        outputs=(("tile", jnp.float32),),
        body=body,
    )
    np.testing.assert_allclose(got, jnp.tanh(x) * scale, rtol=1e-6, atol=1e-6)


def test_a_body_over_whole_rows_yields_one_value_per_row_and_a_normalised_tile():
    x = jax.random.normal(jax.random.key(0), (32, 256), jnp.bfloat16)

    def body(x_ref, out_ref, norm_ref, *, tm, tn):
        assert tn == 256  # a block spans every column
        values = x_ref[...].astype(jnp.float32)
        total = jnp.sum(values * values, axis=1, keepdims=True)
        out_ref[...] = total
        norm_ref[...] = (values * jax.lax.rsqrt(total / tn)).astype(norm_ref.dtype)

    total, norm = _run(
        x,
        rows=32,
        cols=256,
        roles=("tile",),
        outputs=(("row", jnp.float32), ("tile", jnp.bfloat16)),
        body=body,
        full_cols=True,
        row_align=16,
    )
    values = x.astype(jnp.float32)
    want = jnp.sum(values * values, axis=1, keepdims=True)
    np.testing.assert_allclose(total, want, rtol=1e-5)
    np.testing.assert_allclose(
        norm.astype(jnp.float32), values * jax.lax.rsqrt(want / 256), rtol=1e-2, atol=1e-2
    )


def test_a_column_reduction_over_several_row_blocks_yields_column_and_scalar_totals():
    x = jax.random.normal(jax.random.key(0), (64, 384))
    gamma = jax.random.normal(jax.random.key(1), (1, 384))
    loss = jax.random.normal(jax.random.key(2), (64, 1))

    def body(x_ref, gamma_ref, loss_ref, mean_ref, peak_ref, total_ref, peak_acc_ref, *, tm, tn):
        assert (tm, tn) == (16, 128)  # several row blocks fold into each column block's scratch
        total_ref[...] = total_ref[...] + jnp.sum(x_ref[...], axis=0, keepdims=True)
        peak_acc_ref[...] = jnp.maximum(peak_acc_ref[...], jnp.max(loss_ref[...], keepdims=True))

        def finish():
            mean_ref[...] = total_ref[...] / 64 * gamma_ref[...]
            peak_ref[...] = peak_acc_ref[...]

        return finish

    mean, peak = _run(
        x,
        gamma,
        loss,
        rows=64,
        cols=384,
        roles=("tile", "col", "row"),
        outputs=(("col", jnp.float32), ("scalar", jnp.float32)),
        body=body,
        accumulators=(("col", 0.0), ("scalar", -jnp.inf)),
    )
    want = jnp.mean(x, axis=0, keepdims=True) * gamma
    np.testing.assert_allclose(mean, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(peak, jnp.max(loss, keepdims=True), rtol=1e-6)


def test_a_column_reduction_of_bf16_rows_accumulates_in_f32_over_whole_rows():
    x = jax.random.normal(jax.random.key(2), (48, 256), jnp.bfloat16)

    def body(x_ref, out_ref, sum_ref, *, tm, tn):
        assert tn == 256 and tm == 16  # a block spans every column; rows keep bf16's alignment
        sum_ref[...] = sum_ref[...] + jnp.sum(x_ref[...].astype(jnp.float32), axis=0)[None]

        def finish():
            out_ref[...] = sum_ref[...].astype(out_ref.dtype)

        return finish

    got = _run(
        x,
        rows=48,
        cols=256,
        roles=("tile",),
        outputs=(("col", jnp.bfloat16),),
        body=body,
        accumulators=(("col", 0.0),),
        full_cols=True,
        row_align=16,
    )
    want = jnp.sum(x.astype(jnp.float32), axis=0, keepdims=True)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=1e-2, atol=1e-1)
