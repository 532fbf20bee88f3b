"""The paged decode-attention module (pieces/paged_attention.py) run directly in TPU interpret
mode at small shapes, against plain NumPy attention over each sequence's pages gathered by
hand: separate key and value caches and one interleaved cache, lengths of one token, of part
of a page and of the whole table, a shuffled page table with pages no sequence owns, query rows
out of order, and blocks of pages that do not cover a sequence in one step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import paged_attention

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
pytestmark = pytest.mark.slow  # interpret mode: tens of seconds per kernel on a busy machine
PAGE, DIM, PAGES_PER_SEQ = 16, 128, 6


@pytest.fixture(autouse=True)
def two_pages_per_step(monkeypatch):
    """Blocks of two pages: three steps per sequence, the last ones past short lengths."""
    monkeypatch.setattr(paged_attention, "KV_TOKENS_PER_BLOCK", 2 * PAGE)


def _numpy_decode(q, k_cache, v_cache, lengths, table, rows, scale):
    """Softmax attention of q[rows[s]] over the first lengths[s] tokens of sequence s's pages,
    in float64, query head h reading key head h // group."""
    q, k_cache, v_cache = (np.asarray(a, np.float64) for a in (q, k_cache, v_cache))
    group = q.shape[1] // k_cache.shape[2]
    out = np.zeros((len(table), q.shape[1], q.shape[2]))
    for s, pages in enumerate(np.asarray(table)):
        n = int(lengths[s])
        keys = np.concatenate([k_cache[p] for p in pages])[:n]  # (tokens, kv heads, dim)
        values = np.concatenate([v_cache[p] for p in pages])[:n]
        for h in range(q.shape[1]):
            logits = keys[:, h // group] @ q[int(rows[s]), h] * scale
            weights = np.exp(logits - logits.max())
            out[s, h] = weights @ values[:, h // group] / weights.sum()
    return out


def _case(kv_heads, q_heads, interleaved, seed=0):
    keys = jax.random.split(jax.random.key(seed), 4)
    sequences = 3
    total = sequences * PAGES_PER_SEQ + 4  # four pages belong to no sequence
    q = jax.random.normal(keys[0], (sequences + 2, q_heads, DIM), jnp.bfloat16)
    heads = 2 * kv_heads if interleaved else kv_heads
    k_cache = jax.random.normal(keys[1], (total, PAGE, heads, DIM), jnp.bfloat16)
    v_cache = None if interleaved else jax.random.normal(keys[2], k_cache.shape, jnp.bfloat16)
    table = jax.random.permutation(keys[3], total)[: sequences * PAGES_PER_SEQ]
    table = table.reshape(sequences, PAGES_PER_SEQ).astype(jnp.int32)
    lengths = jnp.array([1, PAGE + 5, PAGES_PER_SEQ * PAGE], jnp.int32)
    rows = jnp.array([4, 0, 2], jnp.int32)
    return q, k_cache, v_cache, lengths, table, rows


@pytest.mark.parametrize(
    ("kv_heads", "q_heads", "interleaved"),
    [(2, 4, False), (1, 2, False), (2, 4, True)],
    ids=["grouped heads", "one key head", "keys and values interleaved"],
)
def test_decode_attention_over_shuffled_pages_matches_numpy(kv_heads, q_heads, interleaved):
    q, k_cache, v_cache, lengths, table, rows = _case(kv_heads, q_heads, interleaved)
    scale = DIM**-0.5
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = paged_attention._paged_attention(
            q, k_cache, v_cache, lengths, table, rows, out_dtype=jnp.float32, scale=scale
        )
    if interleaved:
        k_cache, v_cache = k_cache[:, :, 0::2], k_cache[:, :, 1::2]
    want = _numpy_decode(q, k_cache, v_cache, lengths, table, rows, scale)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, atol=2e-2, rtol=2e-2)
