import jax
import jax.numpy as jnp


def get_inputs(dtype=jnp.float32):
    # MaxKernel's adapted style: a dict of sizes inside get_inputs, read by subscript.
    config = {
        'batch_size': 128,
        'in_channels': 64,
        'out_channels': 128,
        'height': 128,
        'width': 128,
        'kernel_size': 3,
    }
    divide_by = 2.0
    k_x, k_w, k_b = jax.random.split(jax.random.key(42), 3)
    x = jax.random.uniform(
        k_x, (config['batch_size'], config['in_channels'], config['height'], config['width']),
        dtype=dtype)
    weight = jax.random.normal(
        k_w, (config['out_channels'], config['in_channels'], config['kernel_size'],
              config['kernel_size']), dtype=dtype) * 0.02
    bias = jax.random.normal(k_b, config['out_channels'], dtype=dtype) * 0.02
    instance_weight = jnp.ones(config['out_channels'], dtype=dtype)
    instance_bias = jnp.zeros(config['out_channels'], dtype=dtype)
    return [x, weight, bias, instance_weight, instance_bias], [divide_by]


def computation(x, weight, bias, instance_weight, instance_bias, divide_by):
    y = jax.lax.conv_general_dilated(
        x, weight, (1, 1), 'VALID', dimension_numbers=('NCHW', 'OIHW', 'NCHW'))
    y = y + bias[None, :, None, None]
    mean = jnp.mean(y, axis=(2, 3), keepdims=True)
    var = jnp.var(y, axis=(2, 3), keepdims=True)
    y = (y - mean) * jax.lax.rsqrt(var + 1e-5)
    y = y * instance_weight[None, :, None, None] + instance_bias[None, :, None, None]
    return y / divide_by
