"""45k_Gemm_GroupNorm_Swish_Multiply_Swish: GEMM, GroupNorm, swish, multiply, swish (KB L2 #88).

y = x @ W^T + b with W stored (out, in). GroupNorm: num_groups groups of
out_features // num_groups contiguous features, mean and biased variance per row and group,
eps 1e-5, * gn_weight + gn_bias. Then swish, * multiply_weight, swish.
All f32, default matmul precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep rows a multiple of 8, K and N multiples of 128 (TPU tiles) and
# the benchmark's group width of 32 features.
CONFIGS = {
    "bench": {"batch": 4096, "in_features": 8192, "out_features": 8192, "num_groups": 256},
    "check": {"batch": 256, "in_features": 512, "out_features": 384, "num_groups": 12},
    "heldout": {"batch": 200, "in_features": 384, "out_features": 640, "num_groups": 20},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    n_out = c["out_features"]
    key_x, key_w, key_b, key_mul = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    gemm_weight = jax.random.normal(key_w, (n_out, c["in_features"]), jnp.float32) * 0.02
    gemm_bias = jax.random.normal(key_b, (n_out,), jnp.float32) * 0.02
    gn_weight = jnp.ones((n_out,), jnp.float32)
    gn_bias = jnp.zeros((n_out,), jnp.float32)
    multiply_weight = jax.random.normal(key_mul, (n_out,), jnp.float32)
    return ((x, gemm_weight, gemm_bias, gn_weight, gn_bias, multiply_weight),
            (c["num_groups"], n_out))


def computation(x, gemm_weight, gemm_bias, gn_weight, gn_bias, multiply_weight,
                num_groups, out_features):
    y = jnp.matmul(x, gemm_weight.T) + gemm_bias
    rows = y.shape[0]
    groups = y.reshape(rows, num_groups, out_features // num_groups)
    mean = jnp.mean(groups, axis=-1, keepdims=True)
    var = jnp.var(groups, axis=-1, keepdims=True)
    y = ((groups - mean) / jnp.sqrt(var + 1e-5)).reshape(rows, out_features)
    y = y * gn_weight + gn_bias
    y = y * jax.nn.sigmoid(y) * multiply_weight
    return y * jax.nn.sigmoid(y)
