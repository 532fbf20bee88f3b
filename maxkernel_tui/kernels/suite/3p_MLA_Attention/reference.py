"""3p_MLA_Attention: DeepSeek-V3 multi-head latent attention (reference written for maxkernel-tui).

q = (x . Wq_down) . Wq_up, split per head into nope and rope dims. kv = x . Wkv_down: the first
kv_lora_rank dims are the latent c, the rest a rope key shared by all heads. k_nope = c . Wk_up,
v = c . Wv_up. RoPE in rotate-half form with f32 angles and bf16 cos/sin. Attention over the
concatenated nope+rope dims: bf16 logits * bf16(1/sqrt(dim)), causal -1e9 mask, bf16 softmax,
P . v; then heads are flattened and projected by W_o. Every matmul has a bf16 output.
"""
import jax
import jax.numpy as jnp

# weight_std is 0.02 in production. The small configs use 0.05 so that, with their narrower
# hidden and latent dims, logits still have production-like spread (a non-uniform softmax).
CONFIGS = {
    "bench": {"batch": 4, "seq": 2048, "hidden": 7168, "q_lora_rank": 1536, "heads": 128,
              "kv_lora_rank": 512, "weight_std": 0.02},
    "check": {"batch": 1, "seq": 256, "hidden": 512, "q_lora_rank": 256, "heads": 4,
              "kv_lora_rank": 512, "weight_std": 0.05},
    "heldout": {"batch": 2, "seq": 384, "hidden": 768, "q_lora_rank": 384, "heads": 2,
                "kv_lora_rank": 256, "weight_std": 0.05},
}
NOPE_DIM, ROPE_DIM, V_DIM, ROPE_THETA = 128, 64, 128, 10000


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    heads, rank = c["heads"], c["kv_lora_rank"]
    weight_shapes = [
        (c["hidden"], c["q_lora_rank"]),                      # q_down
        (c["q_lora_rank"], heads * (NOPE_DIM + ROPE_DIM)),    # q_up
        (c["hidden"], rank + ROPE_DIM),                       # kv_down
        (rank, heads * NOPE_DIM),                             # k_up
        (rank, heads * V_DIM),                                # v_up
        (heads * V_DIM, c["hidden"]),                         # o_proj
    ]
    keys = jax.random.split(jax.random.key(seed), 1 + len(weight_shapes))
    x = jax.random.normal(keys[0], (c["batch"], c["seq"], c["hidden"]), jnp.bfloat16)
    weights = tuple(jax.random.normal(k, s, jnp.bfloat16) * c["weight_std"]
                    for k, s in zip(keys[1:], weight_shapes))
    return (x, *weights), (heads, NOPE_DIM, ROPE_DIM, V_DIM, rank, ROPE_THETA)


def _rope(x, cos, sin):
    """Rotate-half RoPE on the last axis; x is (B, S, H, R), cos/sin are (S, R/2) bf16."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def computation(x, q_down, q_up, kv_down, k_up, v_up, o_proj,
                num_heads, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank,
                rope_theta):
    batch, seq, _ = x.shape
    qk_head_dim = qk_nope_head_dim + qk_rope_head_dim

    q = ((x @ q_down) @ q_up).reshape(batch, seq, num_heads, qk_head_dim)
    q_nope, q_rope = q[..., :qk_nope_head_dim], q[..., qk_nope_head_dim:]
    kv = x @ kv_down
    latent, k_rope = kv[..., :kv_lora_rank], kv[..., kv_lora_rank:]
    k_nope = (latent @ k_up).reshape(batch, seq, num_heads, qk_nope_head_dim)
    v = (latent @ v_up).reshape(batch, seq, num_heads, v_head_dim)

    inv_freq = 1.0 / (rope_theta ** (
        jnp.arange(0, qk_rope_head_dim, 2, dtype=jnp.float32) / qk_rope_head_dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(angles).astype(jnp.bfloat16), jnp.sin(angles).astype(jnp.bfloat16)
    q_rope = _rope(q_rope, cos, sin)
    # One rope key per position, shared by every head.
    k_rope = _rope(k_rope[:, :, None, :], cos, sin)
    k_rope = jnp.broadcast_to(k_rope, (batch, seq, num_heads, qk_rope_head_dim))

    q_full = jnp.concatenate([q_nope, q_rope], axis=-1)
    k_full = jnp.concatenate([k_nope, k_rope], axis=-1)
    # A Python float times a bf16 array rounds the scale to bf16 first.
    logits = jnp.einsum("bqhd,bkhd->bhqk", q_full, k_full) * qk_head_dim ** -0.5
    causal = jnp.tril(jnp.ones((seq, seq), jnp.bool_))
    logits = jnp.where(causal, logits, -1e9)
    probs = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(batch, seq, num_heads * v_head_dim)
    return out @ o_proj
