"""The ragged paged-attention module (pieces/ragged_paged_attention.py) run directly in TPU
interpret mode at small shapes, against plain NumPy causal attention per query row: decodes and
prefill chunks packed in one query buffer, a chunk spanning several query blocks and blocks
holding several sequences, sequence slots past the live count (their rows zero), keys and
values interleaved in one cache or in two, and the work list the wrapper builds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces import paged_attention
from maxkernel_tui.agents.builtin.pieces import ragged_paged_attention as ragged

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
PAGE, DIM, PAGES_PER_SEQ, TOKENS, BLOCK_Q = 8, 128, 4, 32, 8
# Query rows per live sequence: three decodes, a chunk over two blocks, a chunk of five.
Q_LENS = (1, 1, 1, 17, 5)
KV_LENS = (9, 30, 1, 24, 7)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(ragged, "BLOCK_Q", BLOCK_Q)
    monkeypatch.setattr(paged_attention, "KV_TOKENS_PER_BLOCK", 2 * PAGE)


def _starts(slots):
    starts = np.concatenate([[0], np.cumsum(Q_LENS)])
    return np.concatenate([starts, np.full(slots + 1 - len(starts), starts[-1])]).astype(np.int32)


def _numpy_ragged(q, k_cache, v_cache, lengths, table, starts, live, scale):
    """Row r of live sequence s sees its keys j <= lengths[s] - q_len + (r - starts[s])."""
    q, k_cache, v_cache = (np.asarray(a, np.float64) for a in (q, k_cache, v_cache))
    group = q.shape[1] // k_cache.shape[2]
    out = np.zeros(q.shape)
    for s in range(live):
        n, q_len = int(lengths[s]), int(starts[s + 1] - starts[s])
        keys = np.concatenate([k_cache[p] for p in table[s]])
        values = np.concatenate([v_cache[p] for p in table[s]])
        for offset in range(q_len):
            visible = n - q_len + offset + 1
            for h in range(q.shape[1]):
                logits = keys[:visible, h // group] @ q[starts[s] + offset, h] * scale
                weights = np.exp(logits - logits.max())
                out[starts[s] + offset, h] = weights @ values[:visible, h // group] / weights.sum()
    return out


def test_work_items_cover_every_query_block_and_every_sequence_it_holds():
    slots = len(Q_LENS) + 2
    blocks, seqs, firsts, computes = (
        np.asarray(a)
        for a in ragged._work_items(
            jnp.asarray(_starts(slots)), len(Q_LENS), TOKENS, BLOCK_Q, TOKENS // BLOCK_Q + slots
        )
    )
    starts = _starts(slots)
    for block in range(TOKENS // BLOCK_Q):
        rows = set(range(block * BLOCK_Q, (block + 1) * BLOCK_Q))
        holders = {s for s in range(len(Q_LENS)) if rows & set(range(starts[s], starts[s + 1]))}
        mine = (blocks == block) & (computes == 1)
        assert set(seqs[mine]) == holders, f"query block {block}"
        assert ((blocks == block) & (firsts == 1)).sum() == 1  # its output zeroed once


@pytest.mark.slow  # interpret mode
@pytest.mark.parametrize("interleaved", [True, False], ids=["interleaved cache", "two caches"])
def test_mixed_prefill_and_decode_matches_numpy(interleaved):
    kv_heads, q_heads, slots = 2, 4, len(Q_LENS) + 2
    keys = jax.random.split(jax.random.key(1), 4)
    total = slots * PAGES_PER_SEQ
    q = jax.random.normal(keys[0], (TOKENS, q_heads, DIM), jnp.bfloat16)
    heads = 2 * kv_heads if interleaved else kv_heads
    k_cache = jax.random.normal(keys[1], (total, PAGE, heads, DIM), jnp.bfloat16)
    v_cache = None if interleaved else jax.random.normal(keys[2], k_cache.shape, jnp.bfloat16)
    table = jax.random.permutation(keys[3], total).reshape(slots, PAGES_PER_SEQ)
    lengths = np.array([*KV_LENS, 0, 0], np.int32)
    starts = _starts(slots)
    scale = DIM**-0.5
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = ragged._ragged_paged_attention(
            q,
            k_cache,
            v_cache,
            jnp.asarray(lengths),
            table.astype(jnp.int32),
            jnp.asarray(starts),
            jnp.array([len(Q_LENS)], jnp.int32),
            out_dtype=jnp.float32,
            scale=scale,
        )
    if interleaved:
        k_cache, v_cache = k_cache[:, :, 0::2], k_cache[:, :, 1::2]
    want = _numpy_ragged(
        q, k_cache, v_cache, lengths, np.asarray(table), starts, len(Q_LENS), scale
    )
    assert np.all(np.asarray(got)[sum(Q_LENS) :] == 0)  # rows of no live sequence
    np.testing.assert_allclose(np.asarray(got), want, atol=2e-2, rtol=2e-2)
