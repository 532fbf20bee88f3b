import jax
import jax.numpy as jnp

CONFIG = {
    "name": "gmm_small",
    "model": "own",
    "num_groups": 6,
    "m": 1024,
    "k": 512,
    "n": 384,
    "window": 384,
}


def get_inputs(dtype=jnp.bfloat16):
    config = CONFIG
    key_a, key_b = jax.random.split(jax.random.key(0xBADC0DE))
    lhs = jax.random.normal(key_a, (config["m"], config["k"]), dtype=dtype)
    rhs = jax.random.normal(key_b, (config["num_groups"], config["k"], config["n"]), dtype=dtype)
    group_sizes = jnp.array([200, 0, 137, 384, 3, 300], dtype=jnp.int32)
    return [lhs, rhs, group_sizes], [config["window"]]


def computation(lhs, rhs, group_sizes, window):
    starts = jnp.cumsum(group_sizes) - group_sizes
    padded = jnp.pad(lhs, ((0, window), (0, 0)))
    blocks = jax.vmap(lambda s: jax.lax.dynamic_slice_in_dim(padded, s, window))(starts)
    out = jnp.einsum("gwk,gkn->gwn", blocks, rhs, preferred_element_type=jnp.float32)
    keep = jnp.arange(window)[None, :] < group_sizes[:, None]
    out = jnp.where(keep[..., None], out, 0.0).astype(lhs.dtype)
    rows = starts[:, None] + jnp.arange(window)[None, :]
    total = jnp.zeros((lhs.shape[0] + window, rhs.shape[2]), lhs.dtype)
    return total.at[rows].add(out)[: lhs.shape[0]]
