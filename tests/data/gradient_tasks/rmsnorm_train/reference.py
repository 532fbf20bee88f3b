"""RMSNorm for training (a test task): f32 in and out, gradients of x and w judged."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 8, "seq": 512, "hidden": 1024},
    "check": {"batch": 2, "seq": 32, "hidden": 256},
    "heldout": {"batch": 3, "seq": 24, "hidden": 384},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(key_x, (c["batch"], c["seq"], c["hidden"]), jnp.float32)
    w = jax.random.normal(key_w, (c["hidden"],), jnp.float32) * 0.1 + 1.0
    return (x, w), (1e-5,)


def computation(x, w, epsilon):
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + epsilon)
    return x * r * w
