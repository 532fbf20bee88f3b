"""40k_Gemm_GroupNorm_Min_BiasAdd: GEMM, GroupNorm, row min, broadcast bias (KB L2 #75).

y = x @ W^T + linear_bias with W stored (out, in). GroupNorm over groups of 16 contiguous
features (mean and biased variance per row and group, eps 1e-5), * gn_weight + gn_bias.
m = min over features, reshaped to (1, 1, rows, 1); m + bias with bias (1, out, 1, 1)
broadcasts to (1, out, rows, 1). All f32, default matmul precision.
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
    n_out = c["out_features"]
    key_x, key_w, key_b, key_bias = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (n_out, c["in_features"]), jnp.float32) * 0.02
    linear_bias = jax.random.normal(key_b, (n_out,), jnp.float32) * 0.02
    gn_weight = jnp.ones((n_out,), jnp.float32)
    gn_bias = jnp.zeros((n_out,), jnp.float32)
    bias = jax.random.normal(key_bias, (1, n_out, 1, 1), jnp.float32) * 0.02
    return (x, weight, linear_bias, gn_weight, gn_bias, bias), ()


def computation(x, weight, linear_bias, gn_weight, gn_bias, bias):
    # The benchmark has 512 groups of 16 at 8192 features; smaller configs keep the width 16.
    group_width = 16
    y = jnp.matmul(x, weight.T) + linear_bias
    rows, features = y.shape
    groups = y.reshape(rows, features // group_width, group_width)
    mean = jnp.mean(groups, axis=2, keepdims=True)
    var = jnp.var(groups, axis=2, keepdims=True)
    y = ((groups - mean) / jnp.sqrt(var + 1e-5)).reshape(rows, features) * gn_weight + gn_bias
    row_min = jnp.min(y, axis=1).reshape(1, 1, rows, 1)
    return row_min + bias
