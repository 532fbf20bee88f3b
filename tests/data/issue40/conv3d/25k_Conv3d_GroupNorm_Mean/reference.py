import jax
import jax.numpy as jnp

# MaxKernel's adapted style: production sizes only, in a dict at module level, fixed keys.
config = {
    'batch_size': 128,
    'in_channels': 3,
    'out_channels': 24,
    'D': 24,
    'H': 32,
    'W': 32,
    'kernel_size': 3,
    'num_groups': 8,
}


def get_inputs(dtype=jnp.float32):
    key = jax.random.PRNGKey(0)
    k_x, k_w, k_b, k_beta = jax.random.split(key, 4)
    x = jax.random.uniform(
        k_x, (config['batch_size'], config['in_channels'], config['D'], config['H'], config['W']),
        dtype=dtype)
    conv_weight = jax.random.normal(
        k_w, (config['out_channels'], config['in_channels'], config['kernel_size'],
              config['kernel_size'], config['kernel_size']), dtype=dtype) * 0.02
    conv_bias = jax.random.normal(k_b, (config['out_channels'],), dtype=dtype) * 0.02
    gn_weight = jnp.ones((config['out_channels'],), dtype=dtype)
    gn_bias = jax.random.normal(k_beta, (config['out_channels'],), dtype=dtype) * 0.02
    return [x, conv_weight, conv_bias, gn_weight, gn_bias], []


def computation(x, conv_weight, conv_bias, gn_weight, gn_bias):
    x = jax.lax.conv_general_dilated(
        x, conv_weight, window_strides=(1, 1, 1), padding='VALID',
        dimension_numbers=('NCDHW', 'OIDHW', 'NCDHW'))
    x = x + conv_bias.reshape(1, -1, 1, 1, 1)
    N, C, D, H, W = x.shape
    G = config['num_groups']
    xg = x.reshape(N, G, C // G, D, H, W)
    mu = xg.mean(axis=(2, 3, 4, 5), keepdims=True)
    var = jnp.var(xg, axis=(2, 3, 4, 5), keepdims=True)
    xg = (xg - mu) * jax.lax.rsqrt(var + 1e-5)
    x = xg.reshape(N, C, D, H, W) * gn_weight.reshape(1, -1, 1, 1, 1) + gn_bias.reshape(1, -1, 1, 1, 1)
    return x.mean(axis=(1, 2, 3, 4))
