"""Ragged paged attention written per query token (a maxkernel-tui test task in our own style).

Every query token finds its sequence from the start offsets, gathers that sequence's key and
value pages through the block table, and attends causally: token r of a sequence with q_len
query tokens and `context` cached tokens sees keys j <= context - q_len + r.
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"tokens": 256, "seqs": 8, "heads": 8, "kv_heads": 2, "dim": 128, "block": 16,
              "blocks_per_seq": 16},
    "check": {"tokens": 64, "seqs": 4, "heads": 4, "kv_heads": 2, "dim": 128, "block": 16,
              "blocks_per_seq": 8},
    "heldout": {"tokens": 96, "seqs": 6, "heads": 8, "kv_heads": 4, "dim": 128, "block": 16,
                "blocks_per_seq": 8},
}

def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    k_q, k_k, k_v, k_t = jax.random.split(jax.random.key(seed), 4)
    decodes = c["seqs"] // 2
    chunk = (c["tokens"] - decodes) // (c["seqs"] - decodes)
    q_lens = [1] * decodes + [chunk] * (c["seqs"] - decodes - 1)
    q_lens.append(c["tokens"] - sum(q_lens))
    capacity = c["block"] * c["blocks_per_seq"]
    context = [min(capacity, n + 3 + 11 * i) for i, n in enumerate(q_lens)]
    starts = [0]
    for n in q_lens:
        starts.append(starts[-1] + n)
    n_blocks = c["seqs"] * c["blocks_per_seq"]
    cache = (n_blocks, c["block"], c["kv_heads"], c["dim"])
    tables = jax.random.permutation(k_t, n_blocks).reshape(c["seqs"], c["blocks_per_seq"])
    dynamic = (jnp.array(context, jnp.int32), tables.astype(jnp.int32),
               jax.random.normal(k_k, cache, jnp.bfloat16),
               jax.random.normal(k_v, cache, jnp.bfloat16),
               jnp.array(starts, jnp.int32),
               jax.random.normal(k_q, (c["tokens"], c["heads"], c["dim"]), jnp.bfloat16))
    return dynamic, ()

def computation(context_lens, block_tables, k_cache, v_cache, query_start, q):
    tokens, heads, dim = q.shape
    _, block, kv_heads, _ = k_cache.shape
    seqs, blocks_per_seq = block_tables.shape
    token = jnp.arange(tokens)
    owner = jnp.clip(jnp.searchsorted(query_start, token, side="right") - 1, 0, seqs - 1)
    position = context_lens[owner] - (query_start[owner + 1] - query_start[owner]) + (
        token - query_start[owner])
    pages = block_tables[owner]  # (tokens, blocks_per_seq)
    k = k_cache[pages].reshape(tokens, blocks_per_seq * block, kv_heads, dim)
    v = v_cache[pages].reshape(tokens, blocks_per_seq * block, kv_heads, dim)
    qg = q.reshape(tokens, kv_heads, heads // kv_heads, dim)
    scores = jnp.einsum("tkgd,tskd->tkgs", qg, k, preferred_element_type=jnp.float32)
    scores = scores * dim ** -0.5
    key = jnp.arange(blocks_per_seq * block)
    seen = (key[None, :] <= position[:, None]) & (key[None, :] < context_lens[owner][:, None])
    scores = jnp.where(seen[:, None, None, :], scores, -1e9)
    p = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("tkgs,tskd->tkgd", p, v.astype(jnp.float32))
    return out.reshape(tokens, heads, dim).astype(q.dtype)
