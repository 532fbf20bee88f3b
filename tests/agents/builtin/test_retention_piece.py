"""The decayed-scan module (pieces/retention.py) run directly in TPU interpret mode at small
shapes, against plain jnp quadratic forms: RetNet's per-head decay with rows divided by the sum
of |scores|; SSD's cumulative decay with rows divided by |sum of scores| (tiny sums replaced);
query and key chunks of different lengths, a value dimension unlike the key's, and f32 inputs
kept f32."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import retention

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: seconds per kernel on a busy 2-core machine


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 128 over a sequence of 256: one chunk pair below, two on the diagonal, one
    above (skipped)."""
    monkeypatch.setattr(retention, "BLOCK_Q", 128)
    monkeypatch.setattr(retention, "BLOCK_KV", 128)


def _random(*shape, dtype=jnp.bfloat16, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


def _abs_sum(scores):
    return jnp.abs(scores)


def _floor_one(total):
    return jnp.maximum(total, 1.0)


def _plain(scores):
    return scores


def _signed_divisor(total):
    return jnp.maximum(jnp.abs(jnp.where(jnp.abs(total) < 1e-6, 1.0, total)), 1.0)


def _quadratic(q, k, v, decay, row_term, divisor, weights_dtype, *, divide_first=True):
    """The reference's reading: full (seq, seq) scores, masked by `decay` (zero above the
    diagonal), each row divided, rounded to `weights_dtype`, times v. Without `divide_first`,
    the weights are rounded before the division (the kernel's order: it divides once at the
    end), which matters only where a row's divisor is far below its terms."""
    scores = jnp.einsum("bhid,bhjd->bhij", q.astype(jnp.float32), k.astype(jnp.float32)) * decay
    row_divisor = divisor(jnp.sum(row_term(scores), axis=-1, keepdims=True))
    if not divide_first:
        weights = scores.astype(weights_dtype)
        return (
            jnp.einsum(
                "bhij,bhjd->bhid",
                weights,
                v.astype(weights_dtype),
                preferred_element_type=jnp.float32,
            )
            / row_divisor
        )
    weights = (scores / row_divisor).astype(weights_dtype)
    return jnp.einsum(
        "bhij,bhjd->bhid", weights, v.astype(weights_dtype), preferred_element_type=jnp.float32
    )


def _run(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(retention._retention(*args, **kwargs))


def _close(got, want, tolerance):
    np.testing.assert_allclose(
        np.asarray(got, np.float32), np.asarray(want, np.float32), atol=tolerance, rtol=tolerance
    )


def test_per_head_rate_with_rows_divided_by_their_absolute_sum():
    batch, heads, seq, dim = 1, 3, 256, 128
    q, k, v = (_random(batch, heads, seq, dim, seed=s) for s in range(3))
    rate = jnp.log(1.0 - 2.0 ** (-3.0 - jnp.arange(heads, dtype=jnp.float32)))
    distance = (jnp.arange(seq)[:, None] - jnp.arange(seq)[None, :]).astype(jnp.float32)
    decay = jnp.where(distance >= 0, jnp.exp(rate[:, None, None] * distance), 0.0)
    got = _run(q, k, v, rate=rate, out_dtype=jnp.bfloat16, row_term=_abs_sum, divisor=_floor_one)
    want = _quadratic(q, k, v, decay, _abs_sum, _floor_one, jnp.bfloat16)
    assert got.shape == want.shape and got.dtype == jnp.bfloat16
    _close(got, want, 2e-2)


@pytest.mark.parametrize("two_pass", [False, True])
def test_cumulative_decay_with_rows_divided_by_their_signed_sum(monkeypatch, two_pass):
    """In one pass the weights are rounded before the division; in two, after it, as the
    reference rounds them: each matches its own reading closely."""
    monkeypatch.setattr(retention, "BLOCK_Q", 64)  # query chunks shorter than key chunks
    batch, heads, seq, dim, value_dim = 2, 2, 256, 64, 128
    q, k = (_random(batch, heads, seq, dim, seed=s) for s in range(2))
    v = _random(batch, heads, seq, value_dim, seed=2)
    # a decay of ~0.7 a step: scores a few chunks below the diagonal still count, and rows do
    # not cancel so far that the rounding of their weights dominates
    log_decay = jnp.log(jax.nn.sigmoid(_random(batch, heads, seq, dtype=jnp.float32) + 1.0))
    cumulative = jnp.cumsum(log_decay, axis=-1)
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    segment = cumulative[..., :, None] - cumulative[..., None, :]
    decay = jnp.exp(jnp.where(causal, segment, -1e30))
    got = _run(
        q,
        k,
        v,
        cumulative=cumulative,
        out_dtype=jnp.float32,
        row_term=_plain,
        divisor=_signed_divisor,
        two_pass=two_pass,
    )
    want = _quadratic(q, k, v, decay, _plain, _signed_divisor, jnp.bfloat16, divide_first=two_pass)
    assert got.shape == (batch, heads, seq, value_dim)
    _close(got, want, 1e-3)


def test_f32_inputs_and_f32_weights_stay_f32():
    batch, heads, seq, dim = 1, 1, 256, 128
    q, k, v = (_random(batch, heads, seq, dim, dtype=jnp.float32, seed=s) for s in range(3))
    rate = jnp.asarray([-0.01], jnp.float32)
    distance = (jnp.arange(seq)[:, None] - jnp.arange(seq)[None, :]).astype(jnp.float32)
    decay = jnp.where(distance >= 0, jnp.exp(rate[:, None, None] * distance), 0.0)
    got = _run(
        q,
        k,
        v,
        rate=rate,
        out_dtype=jnp.float32,
        row_term=_abs_sum,
        divisor=_floor_one,
        weights_dtype=jnp.float32,
    )
    want = _quadratic(q, k, v, decay, _abs_sum, _floor_one, jnp.float32)
    _close(got, want, 1e-4)


def _run_state_scan(*args, **kwargs):
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        return jax.block_until_ready(retention._state_scan(*args, **kwargs))


def _cumulative_case(dtype):
    """q, k (1, 2, 256, 64), v (.., 128) and a slow cumulative decay (~0.95 a step: the second
    chunk's rows still read the first chunk) with its (seq, seq) decay matrix."""
    batch, heads, seq, dim, value_dim = 1, 2, 256, 64, 128
    q, k = (_random(batch, heads, seq, dim, dtype=dtype, seed=s) for s in range(2))
    v = _random(batch, heads, seq, value_dim, dtype=dtype, seed=2)
    log_decay = jnp.log(jax.nn.sigmoid(_random(batch, heads, seq, dtype=jnp.float32, seed=3) + 3))
    cumulative = jnp.cumsum(log_decay, axis=-1)
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    decay = jnp.exp(jnp.where(causal, cumulative[..., :, None] - cumulative[..., None, :], -1e30))
    return q, k, v, cumulative, decay


@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_the_carried_state_form_equals_the_quadratic_form_in_f32(offset):
    """Two chunks of 128: the second reads the first only through the carried state. `offset`
    on the cumulative log-decay changes no decay (only differences count) but makes
    exp(c_i) overflow: a first chunk that multiplied its empty state by exp(c_i - 0) would
    give NaN."""
    q, k, v, cumulative, decay = _cumulative_case(jnp.float32)
    got = _run_state_scan(
        q,
        k,
        v,
        cumulative + offset,
        out_dtype=jnp.float32,
        divisor=_signed_divisor,
        weights_dtype=jnp.float32,
    )
    want = _quadratic(q, k, v, decay, _plain, _signed_divisor, jnp.float32)
    assert bool(jnp.all(jnp.isfinite(got)))
    _close(got, want, 1e-3)


def test_the_carried_state_form_in_bf16_rounds_like_the_reference():
    """bf16 operands: the chunk's own weights are divided, then rounded, as the reference does;
    what the earlier chunks left is rounded once, in the state, so the two differ by that
    rounding only."""
    q, k, v, cumulative, decay = _cumulative_case(jnp.bfloat16)
    got = _run_state_scan(q, k, v, cumulative, out_dtype=jnp.float32, divisor=_signed_divisor)
    want = _quadratic(q, k, v, decay, _plain, _signed_divisor, jnp.bfloat16)
    _close(got, want, 5e-2)
