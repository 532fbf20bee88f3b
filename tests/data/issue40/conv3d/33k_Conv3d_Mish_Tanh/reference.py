import jax
import jax.numpy as jnp

# MaxKernel's adapted style: production sizes only, in a dict at module level, fixed keys.
config = {
    'batch_size': 16,
    'in_channels': 32,
    'out_channels': 64,
    'D': 32,
    'H': 64,
    'W': 64,
    'kernel_size': 3,
}


def get_inputs(dtype=jnp.float32):
    key = jax.random.key(0)
    k_x, k_w, k_b = jax.random.split(key, 3)
    x = jax.random.uniform(
        k_x, (config['batch_size'], config['in_channels'], config['D'], config['H'], config['W']),
        dtype=dtype)
    conv_weight = jax.random.normal(
        k_w, (config['out_channels'], config['in_channels'], config['kernel_size'],
              config['kernel_size'], config['kernel_size']), dtype=dtype) * 0.02
    conv_bias = jax.random.normal(k_b, (config['out_channels'],), dtype=dtype) * 0.02
    return [x, conv_weight, conv_bias], []


def computation(x, conv_weight, conv_bias):
    x = jax.lax.conv_general_dilated(
        x, conv_weight, window_strides=(1, 1, 1), padding='VALID',
        dimension_numbers=('NCDHW', 'OIDHW', 'NCDHW'))
    x = x + conv_bias.reshape(1, -1, 1, 1, 1)
    x = x * jnp.tanh(jax.nn.softplus(x))
    return jnp.tanh(x)
