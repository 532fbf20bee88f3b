"""6p_Paged_Attention: paged-KV GQA decode attention (reference written for maxkernel-tui).

Sequence s uses query row cu_q_lens[s] (one token; cu_q_lens[s + 1] is ignored). Its keys and
values are the pages page_indices[s, :] flattened in order: token t is slot t % page_size of
page page_indices[s, t // page_size]. Query head h uses kv head h // (num_q_heads / num_kv_heads).
logits = bf16(q . k) * bf16(1/sqrt(head_dim)); keys t >= kv_lens[s] are set to -1e30 (no causal
mask otherwise); softmax over keys in bf16 (row sum in f32); out = bf16(P . v), shape
(num_seqs, num_q_heads, head_dim).
"""
import jax
import jax.numpy as jnp

# In bench every sequence is full (min_kv_len == max_seq_len) and owns contiguous pages, as in
# production. The small configs vary kv_lens and shuffle the page table so both are exercised.
CONFIGS = {
    "bench": {"num_seqs": 64, "q_heads": 64, "kv_heads": 8, "head_dim": 128, "page_size": 16,
              "pages_per_seq": 256, "min_kv_len": 4096, "shuffle_pages": 0},
    "check": {"num_seqs": 8, "q_heads": 16, "kv_heads": 8, "head_dim": 128, "page_size": 16,
              "pages_per_seq": 32, "min_kv_len": 100, "shuffle_pages": 1},
    "heldout": {"num_seqs": 5, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "page_size": 16,
                "pages_per_seq": 24, "min_kv_len": 50, "shuffle_pages": 1},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    num_seqs, head_dim, pages_per_seq = c["num_seqs"], c["head_dim"], c["pages_per_seq"]
    total_pages = num_seqs * pages_per_seq
    max_seq_len = pages_per_seq * c["page_size"]
    key_q, key_k, key_v, key_pages = jax.random.split(jax.random.key(seed), 4)
    queries = jax.random.normal(key_q, (num_seqs, c["q_heads"], head_dim), jnp.bfloat16)
    page_shape = (total_pages, c["page_size"], c["kv_heads"], head_dim)
    k_pages = jax.random.normal(key_k, page_shape, jnp.bfloat16) * 0.02
    v_pages = jax.random.normal(key_v, page_shape, jnp.bfloat16) * 0.02
    # Deterministic spread of lengths in [min_kv_len, max_seq_len].
    kv_lens = max_seq_len - (jnp.arange(num_seqs, dtype=jnp.int32) * 37) % (
        max_seq_len - c["min_kv_len"] + 1)
    pages = jnp.arange(total_pages, dtype=jnp.int32)
    if c["shuffle_pages"]:
        pages = jax.random.permutation(key_pages, pages)
    page_indices = pages.reshape(num_seqs, pages_per_seq)
    cu_q_lens = jnp.arange(num_seqs + 1, dtype=jnp.int32)
    static = (num_seqs, c["q_heads"], c["kv_heads"], head_dim, max_seq_len)
    return (queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens), static


def computation(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens,
                num_seqs, num_q_heads, num_kv_heads, head_dim, max_seq_len):
    group = num_q_heads // num_kv_heads

    def attend_one_seq(seq):
        # (kv head, member): query head h uses kv head h // group.
        q = queries[cu_q_lens[seq]].reshape(num_kv_heads, group, head_dim)
        k = k_pages[page_indices[seq]].reshape(max_seq_len, num_kv_heads, head_dim)
        v = v_pages[page_indices[seq]].reshape(max_seq_len, num_kv_heads, head_dim)
        # A Python float times a bf16 array rounds the scale to bf16 first.
        logits = jnp.einsum("kgd,tkd->kgt", q, k) * head_dim ** -0.5
        logits = jnp.where(jnp.arange(max_seq_len) < kv_lens[seq], logits, -1e30)
        probs = jax.nn.softmax(logits, axis=-1)
        return jnp.einsum("kgt,tkd->kgd", probs, v).reshape(num_q_heads, head_dim)

    return jax.vmap(attend_one_seq)(jnp.arange(num_seqs))
