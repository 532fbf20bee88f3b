"""20k_Gemm_Multiply_LeakyReLU: GEMM, multiply, LeakyReLU (KernelBench L2 #12).

y = (x @ W + b) * 2.0 with W stored (in, out); leaky ReLU: y if y >= 0 else 0.1 * y.
All f32, default matmul precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep rows a multiple of 8 and K, N multiples of 128 (TPU tiles).
CONFIGS = {
    "bench": {"batch": 4096, "in_features": 8192, "out_features": 8192},
    "check": {"batch": 256, "in_features": 512, "out_features": 384},
    "heldout": {"batch": 200, "in_features": 384, "out_features": 640},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["in_features"], c["out_features"]), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    return (x, weight, bias), ()


def computation(x, weight, bias):
    y = (jnp.matmul(x, weight) + bias) * 2.0
    return jnp.where(y >= 0, y, 0.1 * y)
