"""Paged decode attention in our own configured style (a maxkernel-tui test task): the query
first, then the caches, the lengths and the page table last; each query head group shares its
key-value head through a reshape (no repeat), the pages gathered by indexing, the softmax
written out with its running max, and the scale a multiplier.
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"seqs": 16, "heads": 16, "kv_heads": 4, "dim": 128, "page": 32, "pages_per_seq": 16},
    "check": {"seqs": 4, "heads": 8, "kv_heads": 2, "dim": 128, "page": 16, "pages_per_seq": 6},
    "heldout": {"seqs": 6, "heads": 4, "kv_heads": 4, "dim": 128, "page": 16, "pages_per_seq": 4},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    k_q, k_k, k_v, k_t = jax.random.split(jax.random.key(seed), 4)
    pages = c["seqs"] * c["pages_per_seq"] + 3  # a few pages no sequence owns
    cache = (pages, c["page"], c["kv_heads"], c["dim"])
    table = jax.random.permutation(k_t, pages)[: c["seqs"] * c["pages_per_seq"]]
    capacity = c["page"] * c["pages_per_seq"]
    lengths = [capacity - (17 * i) % capacity for i in range(c["seqs"])]
    dynamic = (
        jax.random.normal(k_q, (c["seqs"], c["heads"], c["dim"]), jnp.bfloat16),
        jax.random.normal(k_k, cache, jnp.bfloat16),
        jax.random.normal(k_v, cache, jnp.bfloat16),
        jnp.array(lengths, jnp.int32),
        table.reshape(c["seqs"], c["pages_per_seq"]).astype(jnp.int32),
    )
    return dynamic, ()


def computation(q, key_pages, value_pages, seq_lens, page_table):
    seqs, heads, dim = q.shape
    _, page, kv_heads, _ = key_pages.shape
    span = page_table.shape[1] * page
    k = key_pages[page_table].reshape(seqs, span, kv_heads, dim)
    v = value_pages[page_table].reshape(seqs, span, kv_heads, dim)
    grouped = q.reshape(seqs, kv_heads, heads // kv_heads, dim).astype(jnp.float32)
    scores = jnp.einsum("bkgd,bskd->bkgs", grouped, k.astype(jnp.float32)) * (1.0 / dim**0.5)
    live = jnp.arange(span)[None, :] < seq_lens[:, None]
    scores = jnp.where(live[:, None, None, :], scores, -1e9)
    top = jnp.max(scores, axis=-1, keepdims=True)
    weights = jnp.exp(scores - top)
    weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
    out = jnp.einsum("bkgs,bskd->bkgd", weights, v.astype(jnp.float32))
    return out.reshape(seqs, heads, dim).astype(q.dtype)
