"""The backward pieces (pieces/backward/) run directly in TPU interpret mode at small shapes,
against jax.vjp of plain jnp: RMSNorm over several row blocks (dscale summed across them), a
matmul with either GELU over several blocks of every axis, cross-entropy with every reduction
over several vocabulary blocks, and flash attention causal or not over several query and key
blocks, where blocks above the diagonal are neither computed nor read (NaN there stays out)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.backward import cross_entropy, flash, gemm_gelu, rmsnorm

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


def _random(*shape, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


def _compare(piece, reference, args, cotangent_seed=9, wanted=None):
    """The piece's and the reference's outputs and gradients (of `wanted` positions)."""
    wanted = list(range(len(args))) if wanted is None else wanted

    def with_wanted(function):
        def call(*chosen):
            full = list(args)
            for position, value in zip(wanted, chosen, strict=True):
                full[position] = value
            return function(*full)

        return call

    chosen = [args[i] for i in wanted]
    expected, pullback = jax.vjp(with_wanted(reference), *chosen)
    cotangent = _random(*expected.shape, seed=cotangent_seed)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got, piece_pullback = jax.vjp(with_wanted(piece), *chosen)
        grads = piece_pullback(cotangent)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    for grad, expected_grad in zip(grads, pullback(cotangent), strict=True):
        np.testing.assert_allclose(grad, expected_grad, atol=2e-5, rtol=1e-5)
    return got, grads


def test_rmsnorm_gradients_over_three_row_blocks(monkeypatch):
    monkeypatch.setattr(rmsnorm, "BLOCK_ROWS", 32)

    def reference(x, scale):
        r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
        return x * r * scale

    args = (_random(2, 48, 256), _random(256, seed=1) * 0.1 + 1)
    _compare(lambda x, s: rmsnorm._rmsnorm_training(x, s, eps=1e-5), reference, args)


@pytest.mark.parametrize("approximate", [True, False])
def test_gemm_gelu_gradients_over_several_blocks_of_each_axis(monkeypatch, approximate):
    monkeypatch.setattr(gemm_gelu, "BLOCK_ROWS", 32)
    monkeypatch.setattr(gemm_gelu, "BLOCK_COLS", 128)
    monkeypatch.setattr(gemm_gelu, "BLOCK_DEPTH", 128)

    def reference(x, w):
        return jax.nn.gelu(x @ w, approximate=approximate)

    def piece(x, w):
        return gemm_gelu._gemm_gelu_training(x, w, out_dtype=jnp.float32, approximate=approximate)

    _compare(piece, reference, (_random(64, 256), _random(256, 384, seed=1) / 16))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradient_over_four_vocabulary_blocks(monkeypatch, reduction):
    monkeypatch.setattr(cross_entropy, "BLOCK_ROWS", 16)
    monkeypatch.setattr(cross_entropy, "BLOCK_COLS", 256)
    labels = jax.random.randint(jax.random.key(3), (48,), 0, 1024)

    def reference(logits):
        loss = jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, labels[:, None], -1)[:, 0]
        return {"mean": jnp.mean, "sum": jnp.sum}.get(reduction, lambda a: a)(loss)

    def piece(logits):
        return cross_entropy._cross_entropy_training(logits, labels, reduction=reduction)

    _compare(piece, reference, (_random(48, 1024) * 3,))


SEQ, DIM = 384, 64


def _attention(q, k, v, causal):
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) * DIM**-0.5
    if causal:
        logits = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), logits, -1e30)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(logits, -1), v)


def _flash(causal):
    def piece(q, k, v):
        return flash._flash_attention_training(
            q, k, v, out_dtype=jnp.float32, scale=DIM**-0.5, causal=causal, mask_value=-1e30
        )

    return piece


@pytest.fixture
def blocks_of_128(monkeypatch):
    """Three query and three key blocks: below, on and above the diagonal."""
    monkeypatch.setattr(flash, "BLOCK_Q", 128)
    monkeypatch.setattr(flash, "BLOCK_KV", 128)


@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_dq_dk_dv_over_three_blocks_each_way(blocks_of_128, causal):
    args = tuple(_random(1, 2, SEQ, DIM, seed=s) for s in range(3))
    _compare(_flash(causal), lambda q, k, v: _attention(q, k, v, causal), args)


def test_causal_blocks_above_the_diagonal_are_neither_read_nor_computed(blocks_of_128):
    q, k, v = (_random(1, 1, SEQ, DIM, seed=s) for s in range(3))
    late_keys = jnp.arange(SEQ)[:, None] >= 128
    poisoned_v = jnp.where(late_keys, jnp.nan, v)  # keys only the queries after 128 may see
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        out, pullback = jax.vjp(_flash(True), q, k, poisoned_v)
        dq, _, _ = pullback(jnp.ones_like(out))
    assert np.isfinite(out[..., :128, :]).all() and np.isfinite(dq[..., :128, :]).all()
    early_queries = jnp.where(jnp.arange(SEQ)[:, None] < 128, jnp.nan, q)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        out, pullback = jax.vjp(_flash(True), early_queries, k, v)
        _, dk, dv = pullback(jnp.ones_like(out))
    # keys from 128 on are seen by queries from 128 on only: the poisoned first block is skipped
    assert np.isfinite(dk[..., 128:, :]).all() and np.isfinite(dv[..., 128:, :]).all()
    assert not np.isfinite(dk[..., :128, :]).all()  # and the poison does reach what it should
