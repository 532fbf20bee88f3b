import jax
import jax.numpy as jnp

# MaxKernel's adapted style: production sizes only, as locals of get_inputs, the static
# arguments in a list; the kernel flipped and laid out OIDHW by hand before a dilated conv.


def get_inputs():
    batch_size = 32
    in_channels = 32
    out_channels = 64
    D, H, W = 16, 32, 32
    kernel_size = 4
    stride = 2
    padding = 1
    eps = 1e-5
    scaling_factor = 1.0
    key = jax.random.key(0)
    k1, k2 = jax.random.split(key)
    x = jax.random.uniform(k1, (batch_size, in_channels, D, H, W), dtype=jnp.float32)
    conv_weight = jax.random.normal(
        k2, (in_channels, out_channels, kernel_size, kernel_size, kernel_size),
        dtype=jnp.float32)
    conv_bias = jnp.zeros((out_channels,), dtype=jnp.float32)
    ln_weight = jnp.ones((out_channels,), dtype=jnp.float32)
    ln_bias = jnp.zeros((out_channels,), dtype=jnp.float32)
    dynamic = [x, conv_weight, conv_bias, ln_weight, ln_bias]
    return dynamic, [stride, padding, kernel_size, eps, scaling_factor]


def computation(x, conv_weight, conv_bias, ln_weight, ln_bias, stride, padding,
                kernel_size, eps, scaling_factor):
    w = jnp.flip(conv_weight, axis=(2, 3, 4)).transpose(1, 0, 2, 3, 4)
    pad = kernel_size - 1 - padding
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1, 1), padding=[(pad, pad)] * 3,
        lhs_dilation=(stride, stride, stride),
        dimension_numbers=('NCDHW', 'OIDHW', 'NCDHW'))
    y = y + conv_bias[None, :, None, None, None]
    mean = jnp.mean(y, axis=-1, keepdims=True)
    var = jnp.var(y, axis=-1, keepdims=True)
    y = (y - mean) / jnp.sqrt(var + eps) * ln_weight + ln_bias
    return jax.nn.gelu(y) * scaling_factor
