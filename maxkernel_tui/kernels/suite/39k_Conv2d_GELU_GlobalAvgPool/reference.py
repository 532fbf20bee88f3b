"""39k_Conv2d_GELU_GlobalAvgPool: conv2d, GELU, global average pool (KernelBench L2 #67).

c = conv2d(x, W) with x NCHW, W OIHW, stride 1, VALID, + bias[o]; tanh-approximation GELU;
mean over (H, W) -> (N, C_out). All f32, default conv precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep the input width a multiple of 128 and height a multiple of 8.
CONFIGS = {
    "bench": {"batch": 128, "in_channels": 8, "out_channels": 64, "height": 256, "width": 256},
    "check": {"batch": 2, "in_channels": 8, "out_channels": 64, "height": 16, "width": 128},
    "heldout": {"batch": 3, "in_channels": 8, "out_channels": 32, "height": 24, "width": 256},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["height"], c["width"]), jnp.float32)
    weight = jax.random.normal(
        key_w, (c["out_channels"], c["in_channels"], 3, 3), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_channels"],), jnp.float32) * 0.02
    return (x, weight, bias), ()


def computation(x, weight, bias):
    conv = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"))
    activated = jax.nn.gelu(conv + bias[None, :, None, None], approximate=True)
    return jnp.mean(activated, axis=(2, 3))
