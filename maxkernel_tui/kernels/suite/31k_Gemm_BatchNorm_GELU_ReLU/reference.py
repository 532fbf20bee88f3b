"""31k_Gemm_BatchNorm_GELU_ReLU: GEMM, training-mode BatchNorm, GELU, ReLU (KernelBench L2 #41).

y = x @ W^T + b (W stored (out, in), unscaled N(0, 1), as is b); BatchNorm with batch
statistics: per feature, mean and biased variance over axis 0, eps 1e-5, * bn_weight + bn_bias;
tanh-approximate GELU; ReLU. All f32, default matmul precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep rows a multiple of 8 and K, N multiples of 128 (TPU tiles).
CONFIGS = {
    "bench": {"batch": 16384, "in_features": 8192, "out_features": 8192},
    "check": {"batch": 256, "in_features": 512, "out_features": 384},
    "heldout": {"batch": 200, "in_features": 384, "out_features": 640},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["out_features"], c["in_features"]), jnp.float32)
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32)
    bn_weight = jnp.ones((c["out_features"],), jnp.float32)
    bn_bias = jnp.zeros((c["out_features"],), jnp.float32)
    return (x, weight, bias, bn_weight, bn_bias), ()


def computation(x, weight, bias, bn_weight, bn_bias):
    y = jnp.matmul(x, weight.T) + bias
    mean = jnp.mean(y, axis=0, keepdims=True)
    var = jnp.mean((y - mean) ** 2, axis=0, keepdims=True)
    y = (y - mean) / jnp.sqrt(var + 1e-5) * bn_weight + bn_bias
    return jax.nn.relu(jax.nn.gelu(y, approximate=True))
