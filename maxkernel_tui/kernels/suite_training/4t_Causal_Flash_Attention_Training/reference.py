"""4t_Causal_Flash_Attention_Training: causal multi-head attention and its backward (reference
written for maxkernel-tui).

logits = (q . k^T) in f32 times 1/sqrt(D); keys j > i are set to -1e30; softmax over keys in
f32; out = bf16(bf16(P) . v). Layout (batch, heads, seq, head_dim). Judged on the output and
on the gradients of q, k and v.
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape (Llama-2 7B: 32 heads of 128,
# multi-head, a 4096-token sequence), `check` runs on a CPU in about a second, `heldout` is
# never shown to an agent.
CONFIGS = {
    "bench": {"batch": 1, "heads": 32, "seq": 4096, "head_dim": 128},
    "check": {"batch": 1, "heads": 2, "seq": 256, "head_dim": 128},
    "heldout": {"batch": 2, "heads": 1, "seq": 384, "head_dim": 128},
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
    logits = jnp.einsum("bhqd,bhkd->bhqk", query, key, preferred_element_type=jnp.float32)
    logits = logits * head_dim**-0.5
    causal = jnp.tril(jnp.ones((seq, seq), jnp.bool_))
    probs = jax.nn.softmax(jnp.where(causal, logits, -1e30), axis=-1)
    out = jnp.einsum(
        "bhqk,bhkd->bhqd", probs.astype(value.dtype), value, preferred_element_type=jnp.float32
    )
    return out.astype(query.dtype)
