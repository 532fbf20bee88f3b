"""47k_Matmul_Add_Swish_Tanh_GELU_Hardtanh: GEMM and an activation chain (KernelBench L2 #95).

y = x @ W + b + add_value with W stored (in, out); swish y * sigmoid(y); tanh;
tanh-approximation GELU; clip to [-1, 1]. All f32, default matmul precision.
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
    key_x, key_w, key_b, key_add = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["in_features"], c["out_features"]), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    add_value = jax.random.normal(key_add, (c["out_features"],), jnp.float32) * 0.02
    return (x, weight, bias, add_value), ()


def computation(x, weight, bias, add_value):
    y = jnp.matmul(x, weight) + bias + add_value
    y = jnp.tanh(y * jax.nn.sigmoid(y))
    return jnp.clip(jax.nn.gelu(y, approximate=True), -1.0, 1.0)
