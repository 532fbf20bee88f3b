import jax
import jax.numpy as jnp

# MaxKernel's adapted style: production sizes only, in a dict at module level, fixed keys.
config = {
    'batch_size': 128,
    'in_channels': 64,
    'out_channels': 128,
    'height': 128,
    'width': 128,
    'kernel_size': 3,
    'bias_shape': (128, 1, 1),
}


def get_inputs(dtype=jnp.float32):
    key = jax.random.key(0)
    k_x, k_w, k_cb, k_b = jax.random.split(key, 4)
    x = jax.random.uniform(
        k_x, (config['batch_size'], config['in_channels'], config['height'], config['width']),
        dtype=dtype)
    conv_weight = jax.random.normal(
        k_w, (config['out_channels'], config['in_channels'], config['kernel_size'],
              config['kernel_size']), dtype=dtype) * 0.02
    conv_bias = jax.random.normal(k_cb, config['out_channels'], dtype=dtype) * 0.02
    bias = jax.random.normal(k_b, config['bias_shape'], dtype=dtype) * 0.02
    return [x, conv_weight, conv_bias, bias], []


def computation(x, conv_weight, conv_bias, bias):
    x = jax.lax.conv_general_dilated(
        x, conv_weight, window_strides=(1, 1), padding='VALID',
        dimension_numbers=('NCHW', 'OIHW', 'NCHW'))
    x = x + conv_bias.reshape(1, -1, 1, 1)
    x = jax.nn.relu(x)
    return x + bias
