"""28k_ConvTranspose3d_LayerNorm_GELU_Scaling: transposed conv3d, LayerNorm, GELU, scale
(KernelBench L2 #34).

Transposed conv (PyTorch ConvTranspose3d, weight (Cin, Cout, k, k, k)):
out[n, o, s*d - p + kd, s*h - p + kh, s*w - p + kw] += x[n, i, d, h, w] * W[i, o, kd, kh, kw],
out-of-range positions dropped; computed as a VALID conv of the input dilated by `stride`,
padded by k - 1 - p, with the spatially flipped kernel. + conv_bias[o].
LayerNorm over the last axis only (width, not channels), biased variance, eps; * ln_weight +
ln_bias along that axis; tanh-approximate GELU; * scaling_factor. All f32.
"""
import jax
import jax.numpy as jnp

# Output width (= LayerNorm size) is 2 * width; check/heldout make it differ from out_channels,
# which coincide (64) in bench.
CONFIGS = {
    "bench": {"batch": 32, "in_channels": 32, "out_channels": 64,
              "depth": 16, "height": 32, "width": 32},
    "check": {"batch": 2, "in_channels": 8, "out_channels": 16,
              "depth": 4, "height": 8, "width": 32},
    "heldout": {"batch": 3, "in_channels": 8, "out_channels": 24,
                "depth": 3, "height": 8, "width": 64},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    stride, padding, kernel_size, eps, scaling_factor = 2, 1, 4, 1e-5, 1.0
    key_x, key_w = jax.random.split(jax.random.key(seed))
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["depth"], c["height"], c["width"]), jnp.float32)
    conv_weight = jax.random.normal(
        key_w, (c["in_channels"], c["out_channels"]) + (kernel_size,) * 3, jnp.float32)
    conv_bias = jnp.zeros((c["out_channels"],), jnp.float32)
    out_width = (c["width"] - 1) * stride - 2 * padding + kernel_size
    ln_weight = jnp.ones((out_width,), jnp.float32)
    ln_bias = jnp.zeros((out_width,), jnp.float32)
    return ((x, conv_weight, conv_bias, ln_weight, ln_bias),
            (stride, padding, kernel_size, eps, scaling_factor))


def computation(x, conv_weight, conv_bias, ln_weight, ln_bias,
                stride, padding, kernel_size, eps, scaling_factor):
    edge = kernel_size - 1 - padding
    y = jax.lax.conv_general_dilated(
        x, jnp.flip(conv_weight, axis=(2, 3, 4)), window_strides=(1, 1, 1),
        padding=[(edge, edge)] * 3, lhs_dilation=(stride,) * 3,
        dimension_numbers=("NCDHW", "IODHW", "NCDHW"))
    y = y + conv_bias[:, None, None, None]
    mean = jnp.mean(y, axis=-1, keepdims=True)
    var = jnp.mean((y - mean) ** 2, axis=-1, keepdims=True)
    y = (y - mean) / jnp.sqrt(var + eps) * ln_weight + ln_bias
    return jax.nn.gelu(y, approximate=True) * scaling_factor
