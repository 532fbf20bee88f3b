"""4p_Sparse_Attention: causal GQA with pre-scaled q (reference written for maxkernel-tui).

Layout (batch, heads, seq, head_dim). Query head h uses kv head h // (H_q / H_kv).
logits = bf16(q . k^T) with no scale (q was scaled at input generation); keys j > i are set to
-1e30; softmax over keys in bf16 (row sum in f32); out = bf16(P . v).
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 4, "q_heads": 64, "kv_heads": 8, "seq": 4096, "head_dim": 128},
    "check": {"batch": 1, "q_heads": 8, "kv_heads": 2, "seq": 256, "head_dim": 128},
    "heldout": {"batch": 2, "q_heads": 6, "kv_heads": 3, "seq": 384, "head_dim": 128},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    batch, seq, head_dim = c["batch"], c["seq"], c["head_dim"]
    key_q, key_k, key_v = jax.random.split(jax.random.key(seed), 3)
    # bf16 times a Python float: the scale is rounded to bf16 and so is the product.
    q = jax.random.normal(key_q, (batch, c["q_heads"], seq, head_dim), jnp.bfloat16)
    q = q * head_dim ** -0.5
    kv_shape = (batch, c["kv_heads"], seq, head_dim)
    k = jax.random.normal(key_k, kv_shape, jnp.bfloat16) * 0.02
    v = jax.random.normal(key_v, kv_shape, jnp.bfloat16) * 0.02
    return (q, k, v), (seq, c["q_heads"], c["kv_heads"], head_dim)


def computation(q, k, v, S, H_q, H_kv, D):
    batch = q.shape[0]
    group = H_q // H_kv
    # Split query heads as (kv head, member) so head h uses kv head h // group.
    q = q.reshape(batch, H_kv, group, S, D)
    logits = jnp.einsum("bkgqd,bksd->bkgqs", q, k)
    causal = jnp.tril(jnp.ones((S, S), jnp.bool_))
    logits = jnp.where(causal, logits, -1e30)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bkgqs,bksd->bkgqd", probs, v).reshape(batch, H_q, S, D)
