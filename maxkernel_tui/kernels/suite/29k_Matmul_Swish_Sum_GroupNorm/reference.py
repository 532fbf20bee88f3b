"""29k_Matmul_Swish_Sum_GroupNorm: GEMM, swish, bias, GroupNorm (KernelBench L2 #37).

y = x @ W with W stored (in, out); swish y * sigmoid(y); + bias (after the activation);
GroupNorm per row over num_groups groups of contiguous features, biased variance, eps 1e-5;
* gn_weight + gn_bias. All f32, default matmul precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep rows a multiple of 8 and K, N multiples of 128 (TPU tiles);
# groups stay 64 features wide, as in production.
CONFIGS = {
    "bench": {"batch": 8192, "in_features": 4096, "out_features": 4096, "num_groups": 64},
    "check": {"batch": 256, "in_features": 512, "out_features": 384, "num_groups": 6},
    "heldout": {"batch": 200, "in_features": 384, "out_features": 640, "num_groups": 10},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["in_features"], c["out_features"]), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    gn_weight = jnp.ones((c["out_features"],), jnp.float32)
    gn_bias = jnp.zeros((c["out_features"],), jnp.float32)
    return (x, weight, bias, gn_weight, gn_bias), (c["num_groups"], c["out_features"])


def computation(x, weight, bias, gn_weight, gn_bias, num_groups, out_features):
    y = jnp.matmul(x, weight)
    y = y * jax.nn.sigmoid(y) + bias
    grouped = y.reshape(y.shape[0], num_groups, out_features // num_groups)
    mean = jnp.mean(grouped, axis=2, keepdims=True)
    var = jnp.mean((grouped - mean) ** 2, axis=2, keepdims=True)
    y = ((grouped - mean) / jnp.sqrt(var + 1e-5)).reshape(y.shape)
    return y * gn_weight + gn_bias
