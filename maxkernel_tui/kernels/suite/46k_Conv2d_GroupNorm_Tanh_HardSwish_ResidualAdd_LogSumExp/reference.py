"""46k_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp: conv2d and a fused tail (KB L2 #92).

c = conv2d(x, W) with x NCHW, W OIHW, stride 1, VALID, + conv_bias[o]. GroupNorm with 16
groups of consecutive channels, statistics over (channels in group, H, W), biased variance,
eps 1e-5, * gn_weight + gn_bias. t = tanh; hs = t * clip(t + 3, 0, 6) / 6; r = c + hs (the
residual is the pre-norm conv output); logsumexp over channels, keepdims -> (N, 1, H', W').
All f32, default conv precision.
"""
import jax
import jax.numpy as jnp

# `check` and `heldout` keep the input width a multiple of 128 and height a multiple of 8;
# 64 output channels keep the benchmark's 16 groups of 4.
CONFIGS = {
    "bench": {"batch": 128, "in_channels": 8, "out_channels": 64, "height": 128, "width": 128},
    "check": {"batch": 2, "in_channels": 8, "out_channels": 64, "height": 32, "width": 128},
    "heldout": {"batch": 3, "in_channels": 8, "out_channels": 64, "height": 24, "width": 256},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    n_out = c["out_channels"]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["height"], c["width"]), jnp.float32)
    weight = jax.random.normal(key_w, (n_out, c["in_channels"], 3, 3), jnp.float32) * 0.02
    conv_bias = jax.random.normal(key_b, (n_out,), jnp.float32) * 0.02
    gn_weight = jnp.ones((n_out,), jnp.float32)
    gn_bias = jnp.zeros((n_out,), jnp.float32)
    return (x, weight, conv_bias, gn_weight, gn_bias), ()


def computation(x, weight, conv_bias, gn_weight, gn_bias):
    num_groups = 16
    conv = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW")) + conv_bias[None, :, None, None]
    n, channels, height, width = conv.shape
    groups = conv.reshape(n, num_groups, channels // num_groups, height, width)
    mean = jnp.mean(groups, axis=(2, 3, 4), keepdims=True)
    var = jnp.var(groups, axis=(2, 3, 4), keepdims=True)
    normed = ((groups - mean) / jnp.sqrt(var + 1e-5)).reshape(conv.shape)
    normed = normed * gn_weight[None, :, None, None] + gn_bias[None, :, None, None]
    t = jnp.tanh(normed)
    hardswish = t * jnp.clip(t + 3.0, 0.0, 6.0) / 6.0
    return jax.nn.logsumexp(conv + hardswish, axis=1, keepdims=True)
