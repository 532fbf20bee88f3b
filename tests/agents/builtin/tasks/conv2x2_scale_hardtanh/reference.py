"""A 2x2 valid convolution (NCHW, OIHW), + bias, * scale, hardtanh, minus the per-channel mean.

A task of our own, outside the built-in suite: a kernel other than 3x3 (outputs are height - 1
by width - 1), a (C, 1, 1) scale, and a mean over each output image. Every size differs
between configurations in its own way, and `heldout` sizes are no multiples of `check` ones.
"""

import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 16, "in_channels": 32, "out_channels": 64, "height": 96, "width": 128},
    "check": {"batch": 2, "in_channels": 8, "out_channels": 16, "height": 24, "width": 128},
    "heldout": {"batch": 3, "in_channels": 4, "out_channels": 40, "height": 20, "width": 160},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b, key_s = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(
        key_x, (c["batch"], c["in_channels"], c["height"], c["width"]), jnp.float32
    )
    weight = (
        jax.random.normal(key_w, (c["out_channels"], c["in_channels"], 2, 2), jnp.float32)
        * (4 * c["in_channels"]) ** -0.5
    )
    bias = jax.random.normal(key_b, (c["out_channels"],), jnp.float32) * 0.1
    scale = 1.0 + 0.5 * jax.random.normal(key_s, (c["out_channels"], 1, 1), jnp.float32)
    return (x, weight, bias, scale), ()


def computation(x, weight, bias, scale):
    y = jax.lax.conv_general_dilated(
        x,
        weight,
        window_strides=(1, 1),
        padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
    )
    y = jnp.clip((y + bias[None, :, None, None]) * scale, -1.0, 1.0)
    return (y - jnp.mean(y, axis=(2, 3), keepdims=True)).astype(jnp.bfloat16)
