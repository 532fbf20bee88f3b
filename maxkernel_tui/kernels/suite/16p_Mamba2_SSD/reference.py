"""16p_Mamba2_SSD: SSD quadratic (attention-like) form (reference written for maxkernel-tui).

a = sigmoid(A_log) (f32; a sigmoid, not exp), c = cumsum(log(a + 1e-8)) along the sequence.
L[b,h,i,j] = exp(c_i - c_j) for j <= i, else exp(-1e30) = 0. scores = (q · k^T in f32) * L.
rowsum = sum_j scores; |rowsum| < 1e-6 -> 1; scores / max(|rowsum|, 1); out = bf16(scores) · v.
No 1/sqrt(d) scale.
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape, `check` runs on a CPU
# in well under a second, `heldout` is never shown to an agent.
CONFIGS = {
    "bench": {"batch": 4, "heads": 64, "seq": 4096, "head_dim": 64},
    "check": {"batch": 2, "heads": 4, "seq": 256, "head_dim": 64},
    "heldout": {"batch": 1, "heads": 6, "seq": 384, "head_dim": 64},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    shape = (c["batch"], c["heads"], c["seq"], c["head_dim"])
    key_q, key_k, key_v, key_a = jax.random.split(jax.random.key(seed), 4)
    query = jax.random.normal(key_q, shape, jnp.bfloat16)
    key = jax.random.normal(key_k, shape, jnp.bfloat16)
    value = jax.random.normal(key_v, shape, jnp.bfloat16)
    a_log = jax.random.normal(key_a, shape[:3], jnp.float32) * 0.5 - 4.0
    return (query, key, value, a_log), ()


def computation(query, key, value, a_log):
    log_decay = jnp.log(jax.nn.sigmoid(a_log) + 1e-8)
    cumulative = jnp.cumsum(log_decay, axis=-1)
    positions = jnp.arange(query.shape[2])
    causal = positions[None, :] <= positions[:, None]
    segment = cumulative[..., :, None] - cumulative[..., None, :]
    mask = jnp.exp(jnp.where(causal, segment, -1e30))

    scores = jnp.einsum("bhid,bhjd->bhij", query.astype(jnp.float32), key.astype(jnp.float32))
    scores = scores * mask
    row_sum = jnp.sum(scores, axis=-1, keepdims=True)
    row_sum = jnp.where(jnp.abs(row_sum) < 1e-6, 1.0, row_sum)
    scores = scores / jnp.maximum(jnp.abs(row_sum), 1.0)
    out = jnp.einsum("bhij,bhjd->bhid", scores.astype(jnp.bfloat16), value,
                     preferred_element_type=jnp.float32)
    return out.astype(jnp.bfloat16)
