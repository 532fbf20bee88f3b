"""8p_GEMM: dense bf16 GEMM (reference written for maxkernel-tui).

C = A · B with bf16 inputs, f32 accumulation and a bf16 output.
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape, `check` runs on a CPU
# in well under a second, `heldout` is never shown to an agent.
CONFIGS = {
    "bench": {"m": 8192, "k": 8192, "n": 28672},
    "check": {"m": 256, "k": 512, "n": 768},
    "heldout": {"m": 384, "k": 640, "n": 1152},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_a, key_b = jax.random.split(jax.random.key(seed))
    a = jax.random.normal(key_a, (c["m"], c["k"]), jnp.bfloat16)
    b = jax.random.normal(key_b, (c["k"], c["n"]), jnp.bfloat16) * 0.02
    return (a, b), ()


def computation(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(jnp.bfloat16)
