"""49k_Matmul_AvgPool_GELU_Scale_Max: GEMM, avg pool, GELU, scale, max (KernelBench L2 #98).

y = x @ W + b with W stored (in, out). Average pool along the feature axis with window and
stride pool_kernel_size and VALID padding: means of contiguous blocks of that many features.
Tanh-approximation GELU, * scale_factor, max over axis 1 (no keepdims) -> (batch,).
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
    pool_kernel_size, scale_factor = 16, 2.0
    return (x, weight, bias), (pool_kernel_size, scale_factor)


def computation(x, weight, bias, pool_kernel_size, scale_factor):
    y = jnp.matmul(x, weight) + bias
    rows, features = y.shape
    windows = features // pool_kernel_size
    # VALID pooling drops a trailing partial window.
    pooled = jnp.mean(
        y[:, :windows * pool_kernel_size].reshape(rows, windows, pool_kernel_size), axis=2)
    return jnp.max(jax.nn.gelu(pooled, approximate=True) * scale_factor, axis=1)
