import jax
import jax.numpy as jnp

CONFIG = {
    "name": "moe_small",
    "model": "own",
    "batch": 2,
    "seq_len": 96,
    "d_model": 256,
    "d_ff": 384,
    "n_experts": 6,
    "top_k": 2,
}


def get_inputs(dtype=jnp.bfloat16):
    config = CONFIG
    keys = jax.random.split(jax.random.key(42), 5)
    d, f, e = config["d_model"], config["d_ff"], config["n_experts"]
    x = jax.random.normal(keys[0], (config["batch"], config["seq_len"], d), dtype=dtype)
    w_router = jax.random.normal(keys[1], (d, e), dtype=dtype) * 0.05
    w_gate = jax.random.normal(keys[2], (e, d, f), dtype=dtype) * 0.05
    w_up = jax.random.normal(keys[3], (e, d, f), dtype=dtype) * 0.05
    w_down = jax.random.normal(keys[4], (e, f, d), dtype=dtype) * 0.05
    return [x, w_router, w_gate, w_up, w_down], [config["top_k"]]


def computation(x, w_router, w_gate, w_up, w_down, top_k):
    f32 = jnp.float32
    logits = jnp.einsum("bsd,de->bse", x, w_router, preferred_element_type=f32).astype(x.dtype)
    values, indices = jax.lax.top_k(logits, top_k)
    probs = jax.nn.softmax(values, axis=-1)
    weights = jnp.sum(jax.nn.one_hot(indices, w_router.shape[1], dtype=f32) * probs[..., None], axis=2)
    gate = jnp.einsum("bsd,edf->ebsf", x, w_gate, preferred_element_type=f32).astype(x.dtype)
    up = jnp.einsum("bsd,edf->ebsf", x, w_up, preferred_element_type=f32).astype(x.dtype)
    expert = jnp.einsum(
        "ebsf,efd->ebsd", jax.nn.silu(gate) * up, w_down, preferred_element_type=f32
    ).astype(x.dtype)
    return jnp.einsum("ebsd,bse->bsd", expert.astype(f32), weights)
