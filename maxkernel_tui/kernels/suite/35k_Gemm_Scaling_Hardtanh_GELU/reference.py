"""35k_Gemm_Scaling_Hardtanh_GELU: GEMM, scale, hardtanh, GELU (KernelBench L2 #53).

y = x @ W + b with W stored (in, out); y * scaling_factor; clip to
[hardtanh_min, hardtanh_max]; then 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))).
All f32, default matmul precision.
"""
import math

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
    scaling_factor, hardtanh_min, hardtanh_max = 0.5, -2, 2
    return (x, weight, bias), (scaling_factor, hardtanh_min, hardtanh_max)


def computation(x, weight, bias, scaling_factor, hardtanh_min, hardtanh_max):
    y = (jnp.matmul(x, weight) + bias) * scaling_factor
    v = jnp.clip(y, hardtanh_min, hardtanh_max)
    return 0.5 * v * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
