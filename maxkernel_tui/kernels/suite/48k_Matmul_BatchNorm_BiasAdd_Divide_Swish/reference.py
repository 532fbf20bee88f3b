"""48k_Matmul_BatchNorm_BiasAdd_Divide_Swish: GEMM, inference BatchNorm, bias, swish (KB L2 #97).

y = x @ W + linear_bias with W stored (in, out); (y - bn_mean) / sqrt(bn_var + 1e-5) * bn_scale
+ bn_bias (running statistics); + bias (shape (1,)); swish y * sigmoid(y). The benchmark's
divide by 1.0 is an identity and is left out. All f32, default matmul precision.
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
    weight = jax.random.normal(key_w, (c["in_features"], n_out), jnp.float32) * 0.02
    linear_bias = jax.random.normal(key_b, (n_out,), jnp.float32) * 0.02
    bn_scale = jnp.ones((n_out,), jnp.float32)
    bn_bias = jnp.zeros((n_out,), jnp.float32)
    bn_mean = jnp.zeros((n_out,), jnp.float32)
    bn_var = jnp.ones((n_out,), jnp.float32)
    bias = jax.random.normal(key_bias, (1,), jnp.float32) * 0.02
    return (x, weight, linear_bias, bn_scale, bn_bias, bn_mean, bn_var, bias), ()


def computation(x, weight, linear_bias, bn_scale, bn_bias, bn_mean, bn_var, bias):
    y = jnp.matmul(x, weight) + linear_bias
    y = (y - bn_mean) / jnp.sqrt(bn_var + 1e-5) * bn_scale + bn_bias
    y = y + bias
    return y * jax.nn.sigmoid(y)
