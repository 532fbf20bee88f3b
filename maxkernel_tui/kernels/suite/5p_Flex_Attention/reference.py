"""5p_Flex_Attention: causal MHA plus relative-position bias (reference written for maxkernel-tui).

Layout (batch, heads, seq, head_dim). logits = bf16(q . k^T) * bf16(1/sqrt(head_dim)), then the
per-head bias rel_pos_bias[h, i, j] is added in bf16 (broadcast over batch), then keys j > i are
set to -1e30; softmax over keys in bf16 (row sum in f32); out = bf16(P . v).
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 4, "heads": 64, "seq": 4096, "head_dim": 128},
    "check": {"batch": 1, "heads": 4, "seq": 256, "head_dim": 128},
    "heldout": {"batch": 2, "heads": 3, "seq": 384, "head_dim": 128},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    heads, seq, head_dim = c["heads"], c["seq"], c["head_dim"]
    shape = (c["batch"], heads, seq, head_dim)
    key_q, key_k, key_v, key_bias = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(key_q, shape, jnp.bfloat16)
    k = jax.random.normal(key_k, shape, jnp.bfloat16) * 0.02
    v = jax.random.normal(key_v, shape, jnp.bfloat16) * 0.02
    rel_pos_bias = jax.random.normal(key_bias, (heads, seq, seq), jnp.bfloat16) * 0.01
    return (q, k, v, rel_pos_bias), (head_dim, seq)


def computation(q, k, v, rel_pos_bias, head_dim, seq_len):
    # A Python float times a bf16 array rounds the scale to bf16 first.
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) * head_dim ** -0.5
    # Scale, then bias, then mask: the order changes the bf16 roundings.
    logits = logits + rel_pos_bias
    causal = jnp.tril(jnp.ones((seq_len, seq_len), jnp.bool_))
    logits = jnp.where(causal, logits, -1e30)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, v)
