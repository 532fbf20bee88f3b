"""18k_Conv2D_ReLU_BiasAdd: conv2d, ReLU, per-channel bias (KernelBench L2 #1).

y = conv2d(x, W) with x NCHW, W OIHW, stride 1, VALID; + conv_bias[c]; ReLU;
then + bias, a (C, 1, 1) tensor broadcast over H and W, added after the ReLU.
All f32, default conv precision.
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
    key_x, key_w, key_cb, key_b = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["height"], c["width"]), jnp.float32)
    weight = jax.random.normal(
        key_w, (c["out_channels"], c["in_channels"], 3, 3), jnp.float32) * 0.02
    conv_bias = jax.random.normal(key_cb, (c["out_channels"],), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_channels"], 1, 1), jnp.float32) * 0.02
    return (x, weight, conv_bias, bias), ()


def computation(x, weight, conv_bias, bias):
    y = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = jax.nn.relu(y + conv_bias[None, :, None, None])
    return y + bias
