"""43k_Gemm_BatchNorm_Scaling_Softmax: GEMM, inference BatchNorm, scale, softmax (KB L2 #84).

y = x @ W + b with W stored (in, out); (y - bn_mean) / sqrt(bn_var + 1e-5) * bn_scale + bn_bias
(running statistics, not batch statistics); * scale (shape (1,)); softmax over axis 1.
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
    n_out = c["out_features"]
    key_x, key_w, key_b, key_bn_bias = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["in_features"], n_out), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (n_out,), jnp.float32) * 0.02
    bn_scale = jnp.ones((n_out,), jnp.float32)
    bn_bias = jax.random.normal(key_bn_bias, (n_out,), jnp.float32) * 0.02
    bn_mean = jnp.zeros((n_out,), jnp.float32)
    bn_var = jnp.ones((n_out,), jnp.float32)
    scale = jnp.ones((1,), jnp.float32)
    return (x, weight, bias, bn_scale, bn_bias, bn_mean, bn_var, scale), ()


def computation(x, weight, bias, bn_scale, bn_bias, bn_mean, bn_var, scale):
    y = jnp.matmul(x, weight) + bias
    y = (y - bn_mean) / jnp.sqrt(bn_var + 1e-5) * bn_scale + bn_bias
    return jax.nn.softmax(scale * y, axis=1)
