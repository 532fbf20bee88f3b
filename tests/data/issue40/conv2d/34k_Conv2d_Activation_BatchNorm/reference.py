import jax
import jax.numpy as jnp

CONFIG = {
    'name': '34k_Conv2d_Activation_BatchNorm',
    'batch_size': 64,
    'in_channels': 64,
    'out_channels': 128,
    'height': 128,
    'width': 128,
    'kernel_size': 3,
}


def get_inputs(dtype=jnp.float32):
    k_x, k_w, k_b = jax.random.split(jax.random.key(0xBADC0DE), 3)
    x = jax.random.uniform(
        k_x, (CONFIG['batch_size'], CONFIG['in_channels'], CONFIG['height'], CONFIG['width']),
        dtype=dtype)
    conv_weight = jax.random.normal(
        k_w, (CONFIG['out_channels'], CONFIG['in_channels'], CONFIG['kernel_size'],
              CONFIG['kernel_size']), dtype=dtype)
    conv_bias = jax.random.normal(k_b, CONFIG['out_channels'], dtype=dtype)
    bn_weight = jnp.ones(CONFIG['out_channels'], dtype=dtype)
    bn_bias = jnp.zeros(CONFIG['out_channels'], dtype=dtype)
    return [x, conv_weight, conv_bias, bn_weight, bn_bias], []


def computation(x, conv_weight, conv_bias, bn_weight, bn_bias):
    x = jax.lax.conv_general_dilated(
        x, conv_weight, window_strides=(1, 1), padding='VALID',
        dimension_numbers=('NCHW', 'OIHW', 'NCHW'))
    x = x + conv_bias.reshape(1, -1, 1, 1)
    x = jnp.tanh(jax.nn.softplus(x)) * x
    mean = jnp.mean(x, axis=(0, 2, 3), keepdims=True)
    var = jnp.var(x, axis=(0, 2, 3), keepdims=True)
    x = (x - mean) / jnp.sqrt(var + 1e-5)
    return x * bn_weight.reshape(1, -1, 1, 1) + bn_bias.reshape(1, -1, 1, 1)
