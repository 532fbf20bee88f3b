"""The matmul stage's kernel module (pieces/matmul.py) run directly in TPU interpret mode at
small shapes, against jnp: several depth steps, a weight stored (cols, depth) with bf16
operands, a batch axis with a shared operand, and a block spanning every column with a row
result."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import matmul

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks smaller than the arrays: several row, column and depth steps."""
    monkeypatch.setattr(matmul, "BLOCK_ROWS", 16)
    monkeypatch.setattr(matmul, "BLOCK_COLS", 128)
    monkeypatch.setattr(matmul, "BLOCK_DEPTH", 128)


def _random(*shape, dtype=jnp.float32, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(matmul._matmul_stage(*args, **kwargs))


@pytest.mark.slow
def test_a_gemm_with_a_bias_and_relu_epilogue_over_several_depth_steps():
    x, w, b = _random(32, 384), _random(384, 256, seed=1), _random(1, 256, seed=2)

    def epilogue(acc_ref, b_ref, out_ref, *, tm, tn):
        out_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0)

    got = _run(
        x,
        w,
        b,
        roles=("col",),
        outputs=(("tile", jnp.float32),),
        epilogue=epilogue,
        operands="highest",
    )
    want = jax.nn.relu(jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST) + b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_a_weight_stored_cols_by_depth_with_bf16_operands():
    x, w_t = _random(32, 256), _random(384, 256, seed=1)

    def epilogue(acc_ref, out_ref, *, tm, tn):
        out_ref[...] = acc_ref[...].astype(out_ref.dtype)

    got = _run(
        x,
        w_t,
        roles=(),
        outputs=(("tile", jnp.bfloat16),),
        epilogue=epilogue,
        rhs_transposed=True,
        operands="bf16",
        row_align=16,
    )
    want = jnp.dot(
        x.astype(jnp.bfloat16), w_t.T.astype(jnp.bfloat16), preferred_element_type=jnp.float32
    )
    assert got.dtype == jnp.bfloat16 and got.shape == (32, 384)
    np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=1e-2, atol=1e-1)


@pytest.mark.slow
def test_a_batched_matmul_with_an_operand_shared_by_every_batch_entry():
    x, w, scale = _random(3, 16, 256), _random(3, 256, 128, seed=1), _random(1, 128, seed=2)

    def epilogue(acc_ref, scale_ref, out_ref, *, tm, tn):
        out_ref[...] = acc_ref[...] * scale_ref[...]

    got = _run(
        x,
        w,
        scale,
        roles=("col",),
        outputs=(("tile", jnp.float32),),
        epilogue=epilogue,
        operands="highest",
        batched=(True, True, False, True),
    )
    want = jnp.einsum("bmk,bkn->bmn", x, w, precision=jax.lax.Precision.HIGHEST) * scale
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_a_block_spanning_every_column_yields_a_row_result():
    x, w = _random(32, 256), _random(256, 384, seed=1)

    def epilogue(acc_ref, out_ref, *, tm, tn):
        assert tn == 384  # one block spans every column
        out_ref[...] = jnp.sum(jax.nn.sigmoid(acc_ref[...]), axis=1, keepdims=True)

    got = _run(
        x,
        w,
        roles=(),
        outputs=(("row", jnp.float32),),
        epilogue=epilogue,
        operands="highest",
        full_cols=True,
    )
    want = jnp.sum(jax.nn.sigmoid(jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST)), axis=1)
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_whole_rows_accumulate_in_their_output_and_finish_a_few_rows_at_a_time():
    # A softmax over whole rows and each row's max: the f32 result block is the accumulator,
    # and the epilogue runs on 8 of the block's 16 rows at a time.
    x, w, b = _random(32, 256), _random(256, 384, seed=1), _random(1, 384, seed=2)

    def epilogue(acc_ref, b_ref, out_ref, max_ref, *, tm, tn):
        y = acc_ref[...] + b_ref[...]
        top = jnp.max(y, axis=1, keepdims=True)
        e = jnp.exp(y - jnp.broadcast_to(top, (tm, tn)))
        out_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)
        max_ref[...] = top

    got, top = _run(
        x,
        w,
        b,
        roles=("col",),
        outputs=(("tile", jnp.float32), ("row", jnp.float32)),
        epilogue=epilogue,
        operands="highest",
        full_cols=True,
        epilogue_rows=8,
    )
    y = jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST) + b
    np.testing.assert_allclose(got, jax.nn.softmax(y, axis=1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(top[:, 0], jnp.max(y, axis=1), rtol=1e-5, atol=1e-5)
