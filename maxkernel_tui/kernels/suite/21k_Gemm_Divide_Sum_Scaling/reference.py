"""21k_Gemm_Divide_Sum_Scaling: GEMM, divide, sum, scale (KernelBench L2 #14).

y = x @ W^T at Precision.HIGHEST (W contracted over its second axis, although the benchmark
names it (in, out)); no bias; y / 2; sum over axis 1 with keepdims; * scaling_factor.
W is unscaled N(0, 1). All f32.
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
    key_x, key_w = jax.random.split(jax.random.key(seed))
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["out_features"], c["in_features"]), jnp.float32)
    scaling_factor = 1.5
    return (x, weight), (scaling_factor,)


def computation(x, weight, scaling_factor):
    y = jnp.matmul(x, weight.T, precision=jax.lax.Precision.HIGHEST) / 2
    return jnp.sum(y, axis=1, keepdims=True) * scaling_factor
