"""The flash-attention module (pieces/attention.py) run directly in TPU interpret mode at small
shapes, against a plain jnp softmax attention: no scale or mask; a causal mask with a scale and
grouped key heads in the (batch, seq, heads, dim) layout; a bias shared across the batch on
bf16 inputs whose reference rounds its logits; a per-head bias under the causal mask with query
and key blocks of different lengths."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import attention

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine
SEQ, DIM = 256, 32


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 128: two query and two key blocks, one below, on and above the diagonal."""
    monkeypatch.setattr(attention, "BLOCK_Q", 128)
    monkeypatch.setattr(attention, "BLOCK_KV", 128)


def _random(*shape, dtype=jnp.float32, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(attention._flash_attention(*args, **kwargs))


def _reference(q, k, v, bias=None, *, scale=None, causal=False, mask_value=-jnp.inf, rounds=None):
    """softmax(mask(scale * Q K^T + bias)) V on (batch, heads, seq, dim), key heads repeated."""

    def rounded(logits):
        return logits if rounds is None else logits.astype(rounds).astype(jnp.float32)

    group = q.shape[1] // k.shape[1]
    k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
    logits = rounded(jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32))
    if scale is not None:
        logits = rounded(logits * scale)
    if bias is not None:
        logits = rounded(logits + bias.astype(jnp.float32))
    if causal:
        logits = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), logits, mask_value)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, v.astype(jnp.float32))


def test_plain_attention_over_several_query_and_key_blocks():
    q, k, v = (_random(1, 2, SEQ, DIM, seed=s) for s in range(3))
    got = _run(q, k, v, out_dtype=jnp.float32)
    np.testing.assert_allclose(got, _reference(q, k, v), rtol=1e-4, atol=1e-4)


def test_a_causal_mask_with_a_scale_and_grouped_key_heads_in_seq_first_layout():
    q = _random(1, SEQ, 4, DIM)  # (batch, seq, heads, dim): four query heads
    k, v = _random(1, SEQ, 2, DIM, seed=1), _random(1, SEQ, 2, DIM, seed=2)  # two key heads
    got = _run(
        q, k, v, out_dtype=jnp.float32, scale=0.125, causal=True, mask_value=-1e9, seq_first=True
    )
    heads_first = [jnp.swapaxes(t, 1, 2) for t in (q, k, v)]
    want = _reference(*heads_first, scale=0.125, causal=True, mask_value=-1e9)
    assert got.shape == q.shape
    np.testing.assert_allclose(got, jnp.swapaxes(want, 1, 2), rtol=1e-4, atol=1e-4)


def test_a_bias_shared_across_the_batch_on_bf16_inputs_with_rounded_logits():
    q, k, v = (_random(2, 2, SEQ, DIM, dtype=jnp.bfloat16, seed=s) for s in range(3))
    bias = _random(1, 2, SEQ, SEQ, seed=3)  # batch axis of 1: every batch entry reads it
    got = _run(q, k, v, bias, out_dtype=jnp.bfloat16, scale=0.5, logits_dtype=jnp.bfloat16)
    want = _reference(q, k, v, bias, scale=0.5, rounds=jnp.bfloat16)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=2e-2, atol=2e-2)


def test_a_per_head_bias_under_the_causal_mask_with_shorter_query_blocks(monkeypatch):
    monkeypatch.setattr(attention, "BLOCK_Q", 64)  # four query blocks per key block of 128
    q, k, v = (_random(1, 3, SEQ, DIM, seed=s) for s in range(3))
    bias = _random(3, SEQ, SEQ, seed=4)  # (heads, seq, seq)
    got = _run(q, k, v, bias, out_dtype=jnp.float32, causal=True)
    want = _reference(q, k, v, bias[None], causal=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
