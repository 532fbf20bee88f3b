"""25k_Conv3d_GroupNorm_Mean: conv3d, GroupNorm, mean (KernelBench L2 #23).

y = conv3d(x, W) (NCDHW/OIDHW, stride 1, VALID) + conv_bias[c];
GroupNorm with 8 groups of consecutive channels: per (n, group), statistics over
(channels in group, D, H, W), biased variance, eps 1e-5; * gamma[c] + beta[c];
output = mean over (C, D, H, W), shape (N,). All f32.
"""
import jax
import jax.numpy as jnp

NUM_GROUPS = 8  # fixed by the model, independent of shapes

# `heldout` uses 32 channels (4 per group) where bench and check have 24 (3 per group).
CONFIGS = {
    "bench": {"batch": 128, "in_channels": 3, "out_channels": 24,
              "depth": 24, "height": 32, "width": 32},
    "check": {"batch": 4, "in_channels": 3, "out_channels": 24,
              "depth": 8, "height": 16, "width": 32},
    "heldout": {"batch": 3, "in_channels": 3, "out_channels": 32,
                "depth": 10, "height": 24, "width": 16},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_cb, key_beta = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["depth"], c["height"], c["width"]), jnp.float32)
    weight = jax.random.normal(
        key_w, (c["out_channels"], c["in_channels"], 3, 3, 3), jnp.float32) * 0.02
    conv_bias = jax.random.normal(key_cb, (c["out_channels"],), jnp.float32) * 0.02
    gamma = jnp.ones((c["out_channels"],), jnp.float32)
    beta = jax.random.normal(key_beta, (c["out_channels"],), jnp.float32) * 0.02
    return (x, weight, conv_bias, gamma, beta), ()


def computation(x, weight, conv_bias, gamma, beta):
    y = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1, 1), padding="VALID",
        dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
    y = y + conv_bias[:, None, None, None]
    n, c, d, h, w = y.shape
    grouped = y.reshape(n, NUM_GROUPS, c // NUM_GROUPS, d, h, w)
    mean = jnp.mean(grouped, axis=(2, 3, 4, 5), keepdims=True)
    var = jnp.mean((grouped - mean) ** 2, axis=(2, 3, 4, 5), keepdims=True)
    y = ((grouped - mean) / jnp.sqrt(var + 1e-5)).reshape(n, c, d, h, w)
    y = y * gamma[:, None, None, None] + beta[:, None, None, None]
    return jnp.mean(y, axis=(1, 2, 3, 4))
