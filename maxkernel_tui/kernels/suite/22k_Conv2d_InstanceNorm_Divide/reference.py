"""22k_Conv2d_InstanceNorm_Divide: conv2d, InstanceNorm, divide (KernelBench L2 #17).

y = conv2d(x, W) (NCHW/OIHW, stride 1, VALID) + conv_bias[c];
InstanceNorm: per (n, c), (y - mean) / sqrt(var + 1e-5) over (H, W), biased variance,
then * in_weight[c] + in_bias[c]; finally / divide_by_value. All f32.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep H a multiple of 8 and W a multiple of 128, like production.
CONFIGS = {
    "bench": {"batch": 128, "in_channels": 64, "out_channels": 128, "height": 128, "width": 128},
    "check": {"batch": 2, "in_channels": 16, "out_channels": 32, "height": 32, "width": 128},
    "heldout": {"batch": 3, "in_channels": 8, "out_channels": 24, "height": 24, "width": 256},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_cb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["height"], c["width"]), jnp.float32)
    weight = jax.random.normal(
        key_w, (c["out_channels"], c["in_channels"], 3, 3), jnp.float32) * 0.02
    conv_bias = jax.random.normal(key_cb, (c["out_channels"],), jnp.float32) * 0.02
    in_weight = jnp.ones((c["out_channels"],), jnp.float32)
    in_bias = jnp.zeros((c["out_channels"],), jnp.float32)
    divide_by_value = 2.0
    return (x, weight, conv_bias, in_weight, in_bias), (divide_by_value,)


def computation(x, weight, conv_bias, in_weight, in_bias, divide_by_value):
    y = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = y + conv_bias[None, :, None, None]
    mean = jnp.mean(y, axis=(2, 3), keepdims=True)
    var = jnp.mean((y - mean) ** 2, axis=(2, 3), keepdims=True)
    y = (y - mean) / jnp.sqrt(var + 1e-5)
    y = y * in_weight[None, :, None, None] + in_bias[None, :, None, None]
    return y / divide_by_value
