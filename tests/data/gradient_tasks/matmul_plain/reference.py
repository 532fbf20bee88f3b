import jax
import jax.numpy as jnp


def get_inputs():
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    x = jax.random.normal(k1, (2048, 512), dtype=jnp.float32)
    w = jax.random.normal(k2, (512, 2048), dtype=jnp.float32)
    return (x, w), ()


def computation(x, w):
    return jnp.dot(x, w)
