import jax
import jax.numpy as jnp


def get_inputs(dtype=jnp.float32):
    config = {
        'batch_size': 128,
        'in_channels': 8,
        'out_channels': 64,
        'height': 128,
        'width': 128,
        'kernel_size': 3,
        'groups': 16,
    }
    key = jax.random.key(0)
    k_x, k_w, k_b = jax.random.split(key, 3)
    x = jax.random.uniform(
        k_x, (config['batch_size'], config['in_channels'], config['height'], config['width']),
        dtype=dtype)
    conv_weight = jax.random.normal(
        k_w, (config['out_channels'], config['in_channels'], config['kernel_size'],
              config['kernel_size']), dtype=dtype) * 0.02
    conv_bias = jax.random.normal(k_b, (config['out_channels'],), dtype=dtype) * 0.02
    group_norm_weight = jnp.ones((config['out_channels'],), dtype=dtype)
    group_norm_bias = jnp.zeros((config['out_channels'],), dtype=dtype)
    return [x, conv_weight, conv_bias, group_norm_weight, group_norm_bias], [config['groups']]


def computation(x, conv_weight, conv_bias, group_norm_weight, group_norm_bias, groups):
    x_conv = jax.lax.conv_general_dilated(
        x, conv_weight, window_strides=(1, 1), padding='VALID',
        dimension_numbers=('NCHW', 'OIHW', 'NCHW'))
    x_conv = x_conv + conv_bias.reshape(1, -1, 1, 1)
    n, c, h, w = x_conv.shape
    x_grouped = x_conv.reshape(n, groups, c // groups, h, w)
    mean = jnp.mean(x_grouped, axis=(2, 3, 4), keepdims=True)
    var = jnp.var(x_grouped, axis=(2, 3, 4), keepdims=True)
    x_norm = ((x_grouped - mean) / jnp.sqrt(var + 1e-5)).reshape(n, c, h, w)
    x_norm = x_norm * group_norm_weight.reshape(1, -1, 1, 1) + group_norm_bias.reshape(1, -1, 1, 1)
    x_tanh = jnp.tanh(x_norm)
    x_hard_swish = x_tanh * jax.nn.relu6(x_tanh + 3) / 6
    x_res = x_conv + x_hard_swish
    return jax.scipy.special.logsumexp(x_res, axis=1, keepdims=True)
