"""19k_Matmul_Subtract_Multiply_ReLU: GEMM, subtract, multiply, ReLU (KernelBench L2 #9).

y = x @ W + b with W stored (in, out); (y - subtract_value) * multiply_value; ReLU.
All f32, default matmul precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep rows a multiple of 8 and K, N multiples of 128 (TPU tiles).
# weight_std grows as K shrinks so that y keeps the production spread (std about 1) and the
# ReLU after the shift by 2.0 is still active for some outputs.
CONFIGS = {
    "bench": {"batch": 4096, "in_features": 8192, "out_features": 8192, "weight_std": 0.02},
    "check": {"batch": 256, "in_features": 512, "out_features": 384, "weight_std": 0.08},
    "heldout": {"batch": 200, "in_features": 384, "out_features": 640, "weight_std": 0.09},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(key_x, (c["batch"], c["in_features"]), jnp.float32)
    weight = jax.random.normal(
        key_w, (c["in_features"], c["out_features"]), jnp.float32) * c["weight_std"]
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    subtract_value, multiply_value = 2.0, 1.5
    return (x, weight, bias), (subtract_value, multiply_value)


def computation(x, weight, bias, subtract_value, multiply_value):
    y = jnp.matmul(x, weight) + bias
    return jax.nn.relu((y - subtract_value) * multiply_value)
