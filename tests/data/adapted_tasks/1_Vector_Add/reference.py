import jax
import jax.numpy as jnp


def get_inputs():
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    a = jax.random.normal(k1, (4096,), dtype=jnp.float32)
    b = jax.random.normal(k2, (4096,), dtype=jnp.float32)
    return (a, b), (2.0,)


def computation(a, b, scale):
    return (a + b) * scale
