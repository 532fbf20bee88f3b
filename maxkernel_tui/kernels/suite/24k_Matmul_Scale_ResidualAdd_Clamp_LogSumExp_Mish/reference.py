"""24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish: GEMM, scale, residual add, clamp,
logsumexp, mish (KernelBench L2 #22).

y = (x @ W^T + b) * scale_factor (W contracted over its second axis); y = y + y;
clamp to [clamp_min, clamp_max]; z = logsumexp over axis 1 with keepdims;
output z * mish(z) with mish(v) = v * tanh(logaddexp(v, 0)). All f32, default matmul precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep rows a multiple of 8 and K, N multiples of 128 (TPU tiles).
# weight_std grows as K shrinks so that 4 * y keeps the production spread (std about 4) and the
# clamp at +-10 still bites.
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
        key_w, (c["out_features"], c["in_features"]), jnp.float32) * c["weight_std"]
    bias = jax.random.normal(key_b, (c["out_features"],), jnp.float32) * 0.02
    scale_factor, clamp_min, clamp_max = 2.0, -10.0, 10.0
    return (x, weight, bias), (scale_factor, clamp_min, clamp_max)


def computation(x, weight, bias, scale_factor, clamp_min, clamp_max):
    y = (jnp.matmul(x, weight.T) + bias) * scale_factor
    y = jnp.clip(y + y, clamp_min, clamp_max)
    z = jax.nn.logsumexp(y, axis=1, keepdims=True)
    return z * (z * jnp.tanh(jnp.logaddexp(z, 0.0)))
