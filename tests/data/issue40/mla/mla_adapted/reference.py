import jax
import jax.numpy as jnp

CONFIG = {
    "name": "mla_small",
    "model": "deepseek-style",
    "batch": 4,
    "seq_len": 640,
    "emb_dim": 1280,
    "num_heads": 8,
    "q_lora_rank": 384,
    "kv_lora_rank": 320,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "rope_theta": 10000.0,
}


def _rope(x, theta):
    s, half = x.shape[1], x.shape[-1] // 2
    freqs = 1.0 / (theta ** (jnp.arange(0, x.shape[-1], 2, dtype=jnp.float32) / x.shape[-1]))
    angles = jnp.arange(s, dtype=jnp.float32)[:, None] * freqs[None, :]
    cos = jnp.cos(angles).astype(x.dtype)[None, :, None, :]
    sin = jnp.sin(angles).astype(x.dtype)[None, :, None, :]
    a, b = x[..., :half], x[..., half:]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def get_inputs():
    C = CONFIG
    B, S, E = C["batch"], C["seq_len"], C["emb_dim"]
    H = C["num_heads"]
    ql, kvl = C["q_lora_rank"], C["kv_lora_rank"]
    nope, rope, vd = C["qk_nope_head_dim"], C["qk_rope_head_dim"], C["v_head_dim"]
    keys = jax.random.split(jax.random.PRNGKey(42), 7)
    dt = jnp.bfloat16
    x = jax.random.normal(keys[0], (B, S, E), dt)
    q_down = jax.random.normal(keys[1], (E, ql), dt) * 0.02
    q_up = jax.random.normal(keys[2], (ql, H * (nope + rope)), dt) * 0.02
    kv_down = jax.random.normal(keys[3], (E, kvl + rope), dt) * 0.02
    k_up = jax.random.normal(keys[4], (kvl, H * nope), dt) * 0.02
    v_up = jax.random.normal(keys[5], (kvl, H * vd), dt) * 0.02
    o_proj = jax.random.normal(keys[6], (H * vd, E), dt) * 0.02
    static = [H, nope, rope, vd, kvl, C["rope_theta"]]
    return [x, q_down, q_up, kv_down, k_up, v_up, o_proj], static


def computation(x, q_down, q_up, kv_down, k_up, v_up, o_proj, H, nope, rope, vd, kvl, theta):
    B, S, E = x.shape
    q = ((x @ q_down) @ q_up).reshape(B, S, H, nope + rope)
    kv = x @ kv_down
    c, k_rope = kv[..., :kvl], kv[..., kvl:]
    k_nope = (c @ k_up).reshape(B, S, H, nope)
    v = (c @ v_up).reshape(B, S, H, vd)
    k_rope = jnp.broadcast_to(k_rope[:, :, None, :], (B, S, H, rope))
    q_full = jnp.concatenate([q[..., :nope], _rope(q[..., nope:], theta)], axis=-1)
    k_full = jnp.concatenate([k_nope, _rope(k_rope, theta)], axis=-1)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q_full, k_full) * ((nope + rope) ** -0.5)
    logits = jnp.where(jnp.tril(jnp.ones((S, S), dtype=bool)), logits, -1e9)
    out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)
    return out.reshape(B, S, H * vd) @ o_proj
