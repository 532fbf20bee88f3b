"""1r_Scaled_Add: (x + y) * 2 on f32 matrices; a task of the Ray executor's tests, small enough
that a node evaluates a kernel in seconds."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"rows": 256, "cols": 512},
    "check": {"rows": 16, "cols": 256},
    "heldout": {"rows": 24, "cols": 384},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_y = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(key_x, (c["rows"], c["cols"]), jnp.float32)
    y = jax.random.normal(key_y, (c["rows"], c["cols"]), jnp.float32)
    return (x, y), ()


def computation(x, y):
    return (x + y) * 2.0
