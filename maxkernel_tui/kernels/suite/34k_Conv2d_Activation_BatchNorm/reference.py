"""34k_Conv2d_Activation_BatchNorm: conv2d, mish, training-mode BatchNorm (KernelBench L2 #52).

y = conv2d(x, W) (NCHW/OIHW, stride 1, VALID) + conv_bias[c];
mish: tanh(softplus(y)) * y with softplus = logaddexp(y, 0);
BatchNorm2d with batch statistics: per channel, mean and biased variance over (N, H, W),
(y - mean) / sqrt(var + 1e-5) * bn_weight[c] + bn_bias[c]. All f32.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep H a multiple of 8 and W a multiple of 128, like production.
CONFIGS = {
    "bench": {"batch": 64, "in_channels": 64, "out_channels": 128, "height": 128, "width": 128},
    "check": {"batch": 2, "in_channels": 16, "out_channels": 32, "height": 32, "width": 128},
    "heldout": {"batch": 3, "in_channels": 8, "out_channels": 24, "height": 24, "width": 256},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_cb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["height"], c["width"]), jnp.float32)
    conv_weight = jax.random.normal(
        key_w, (c["out_channels"], c["in_channels"], 3, 3), jnp.float32)
    conv_bias = jax.random.normal(key_cb, (c["out_channels"],), jnp.float32)
    bn_weight = jnp.ones((c["out_channels"],), jnp.float32)
    bn_bias = jnp.zeros((c["out_channels"],), jnp.float32)
    return (x, conv_weight, conv_bias, bn_weight, bn_bias), ()


def computation(x, conv_weight, conv_bias, bn_weight, bn_bias):
    y = jax.lax.conv_general_dilated(
        x, conv_weight, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = y + conv_bias[None, :, None, None]
    y = jnp.tanh(jnp.logaddexp(y, 0.0)) * y
    mean = jnp.mean(y, axis=(0, 2, 3), keepdims=True)
    var = jnp.mean((y - mean) ** 2, axis=(0, 2, 3), keepdims=True)
    y = (y - mean) / jnp.sqrt(var + 1e-5)
    return y * bn_weight[None, :, None, None] + bn_bias[None, :, None, None]
