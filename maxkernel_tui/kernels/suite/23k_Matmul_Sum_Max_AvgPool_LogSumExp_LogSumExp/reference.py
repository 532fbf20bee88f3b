"""23k_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp: GEMM and chained reductions
(KernelBench L2 #18).

y = x @ W^T + b (W contracted over its second axis); sum over axis 1 with keepdims; then max,
mean, logsumexp, logsumexp over axis 1 with keepdims. Those four act on a size-1 axis and are
identities, so the output equals the row sums. All f32, default matmul precision.
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
    weight = jax.random.normal(key_w, (c["out_features"], c["in_features"]), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    return (x, weight, bias), ()


def computation(x, weight, bias):
    y = jnp.matmul(x, weight.T) + bias
    y = jnp.sum(y, axis=1, keepdims=True)
    y = jnp.max(y, axis=1, keepdims=True)
    y = jnp.mean(y, axis=1, keepdims=True)
    y = jax.nn.logsumexp(y, axis=1, keepdims=True)
    return jax.nn.logsumexp(y, axis=1, keepdims=True)
