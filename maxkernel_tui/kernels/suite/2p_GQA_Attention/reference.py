"""2p_GQA_Attention: grouped-query causal attention (reference written for maxkernel-tui).

Inputs are (batch, seq, heads, head_dim). Each kv head serves G = Hq / Hkv consecutive query
heads (query head h uses kv head h // G). logits = bf16(q . k^T) * bf16(1/sqrt(D)); keys j > i
are set to -1e9; softmax over keys in bf16 (row sum in f32); out = bf16(P . v), in BSHD layout.
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 4, "seq": 4096, "q_heads": 128, "kv_heads": 8, "head_dim": 128},
    "check": {"batch": 1, "seq": 256, "q_heads": 32, "kv_heads": 8, "head_dim": 128},
    "heldout": {"batch": 2, "seq": 384, "q_heads": 24, "kv_heads": 8, "head_dim": 128},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_q, key_k, key_v = jax.random.split(jax.random.key(seed), 3)
    query = jax.random.normal(
        key_q, (c["batch"], c["seq"], c["q_heads"], c["head_dim"]), jnp.bfloat16)
    kv_shape = (c["batch"], c["seq"], c["kv_heads"], c["head_dim"])
    key = jax.random.normal(key_k, kv_shape, jnp.bfloat16)
    value = jax.random.normal(key_v, kv_shape, jnp.bfloat16)
    return (query, key, value), ()


def computation(query, key, value):
    batch, seq, q_heads, head_dim = query.shape
    kv_heads = key.shape[2]
    group = q_heads // kv_heads
    # Split query heads as (kv head, member) so head h = kv * group + member, i.e. kv = h // group.
    q = query.reshape(batch, seq, kv_heads, group, head_dim)
    # A Python float times a bf16 array rounds the scale to bf16 first.
    logits = jnp.einsum("bqkgd,bskd->bkgqs", q, key) * head_dim ** -0.5
    causal = jnp.tril(jnp.ones((seq, seq), jnp.bool_))
    logits = jnp.where(causal, logits, -1e9)
    probs = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bkgqs,bskd->bqkgd", probs, value)
    return out.reshape(batch, seq, q_heads, head_dim)
