"""small_gemm: C = A . B in f32 (a test task of maxkernel-tui's production-shape defences)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"m": 1024, "k": 512, "n": 512},
    "check": {"m": 256, "k": 256, "n": 256},
    "heldout": {"m": 256, "k": 512, "n": 384},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_a, key_b = jax.random.split(jax.random.key(seed))
    a = jax.random.normal(key_a, (c["m"], c["k"]), jnp.float32)
    b = jax.random.normal(key_b, (c["k"], c["n"]), jnp.float32)
    return (a, b), ()


def computation(a, b):
    return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)
