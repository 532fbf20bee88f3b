"""1p_Flash_Attention: causal multi-head attention (reference written for maxkernel-tui).

logits = bf16(q . k^T) * bf16(1/sqrt(D)); keys j > i are set to -1e9;
softmax over keys in bf16 (row sum accumulated in f32); out = bf16(P . v).
Layout (batch, heads, seq, head_dim); every matmul has a bf16 output.
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 4, "heads": 64, "seq": 4096, "head_dim": 128},
    "check": {"batch": 2, "heads": 4, "seq": 256, "head_dim": 128},
    "heldout": {"batch": 3, "heads": 2, "seq": 384, "head_dim": 128},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    shape = (c["batch"], c["heads"], c["seq"], c["head_dim"])
    key_q, key_k, key_v = jax.random.split(jax.random.key(seed), 3)
    query = jax.random.normal(key_q, shape, jnp.bfloat16)
    key = jax.random.normal(key_k, shape, jnp.bfloat16)
    value = jax.random.normal(key_v, shape, jnp.bfloat16)
    return (query, key, value), ()


def computation(query, key, value):
    seq, head_dim = query.shape[-2:]
    # A Python float times a bf16 array rounds the scale to bf16 first.
    logits = jnp.einsum("bhqd,bhkd->bhqk", query, key) * head_dim ** -0.5
    causal = jnp.tril(jnp.ones((seq, seq), jnp.bool_))
    logits = jnp.where(causal, logits, -1e9)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, value)
