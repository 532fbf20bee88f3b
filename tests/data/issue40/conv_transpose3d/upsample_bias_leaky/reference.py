"""upsample_bias_leaky: a learned 2x upsampling of a volume (jax.lax.conv_transpose, 'SAME',
kernel 3: padding (2, 1) per axis, so the two phases of an axis take 2 and 1 taps), a
per-channel bias, leaky ReLU and a scale (an own task for the transposed 3-D convolution
family: the bias first among the arguments, the kernel last, transpose_kernel=True)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"n": 4, "c_in": 16, "c_out": 32, "d": 8, "h": 16, "w": 16},
    "check": {"n": 2, "c_in": 8, "c_out": 16, "d": 3, "h": 6, "w": 10},
    "heldout": {"n": 3, "c_in": 8, "c_out": 8, "d": 4, "h": 5, "w": 12},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    k_bias, k_volume, k_filters = jax.random.split(jax.random.key(seed), 3)
    bias = 0.1 * jax.random.normal(k_bias, (c["c_out"],), jnp.float32)
    volume = jax.random.normal(k_volume, (c["n"], c["c_in"], c["d"], c["h"], c["w"]), jnp.float32)
    # (in, out, taps...) as the forward convolution it transposes would hold it (O = c_in)
    filters = 0.1 * jax.random.normal(k_filters, (c["c_in"], c["c_out"], 3, 3, 3), jnp.float32)
    return (bias, volume, filters), ()


def computation(bias, volume, filters):
    y = jax.lax.conv_transpose(
        volume, filters, (2, 2, 2), "SAME",
        dimension_numbers=("NCDHW", "OIDHW", "NCDHW"), transpose_kernel=True)
    y = y + bias[:, None, None, None]
    return 1.5 * jax.nn.leaky_relu(y, 0.2)
