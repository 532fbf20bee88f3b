"""26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply: GEMM, InstanceNorm, add, multiply
(KernelBench L2 #28).

t = x @ W^T + b (W stored (out, in)), viewed as (batch, features, 1, 1); InstanceNorm over the
1x1 spatial dims (mean = t, variance 0, eps 1e-5) * in_weight + in_bias; squeeze; + y; * y.
The normalized value is exactly 0, so the output is (in_bias + y) * y unless t is not finite.
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
    key_x, key_y, key_w, key_b, key_ib = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    y = jax.random.uniform(key_y, (c["batch"], c["out_features"]), jnp.float32)
    bmm_weight = jax.random.normal(
        key_w, (c["out_features"], c["in_features"]), jnp.float32) * 0.02
    bmm_bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    in_weight = jnp.ones((c["out_features"],), jnp.float32)
    in_bias = jax.random.normal(key_ib, (c["out_features"],), jnp.float32) * 0.02
    return (x, y, bmm_weight, bmm_bias, in_weight, in_bias), ()


def computation(x, y, bmm_weight, bmm_bias, in_weight, in_bias):
    t = (jnp.matmul(x, bmm_weight.T) + bmm_bias)[:, :, None, None]
    mean = jnp.mean(t, axis=(2, 3), keepdims=True)
    var = jnp.mean((t - mean) ** 2, axis=(2, 3), keepdims=True)
    t = (t - mean) / jnp.sqrt(var + 1e-5)
    t = t * in_weight[None, :, None, None] + in_bias[None, :, None, None]
    return (t[:, :, 0, 0] + y) * y
