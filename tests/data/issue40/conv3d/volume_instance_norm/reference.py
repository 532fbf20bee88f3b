"""volume_instance_norm: a 3-D convolution with an uneven (2, 3, 3) kernel over 4 input
channels, then an instance norm (statistics per image and channel over every voxel), a scale
per channel and ReLU (an own task for the 3-D convolution family with an epilogue over whole
images: the volume comes between its scale and its filters)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"n": 6, "c_in": 4, "c_out": 16, "d": 10, "h": 18, "w": 20},
    "check": {"n": 2, "c_in": 4, "c_out": 16, "d": 5, "h": 9, "w": 12},
    "heldout": {"n": 3, "c_in": 4, "c_out": 8, "d": 4, "h": 10, "w": 16},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    k_scale, k_volume, k_filters = jax.random.split(jax.random.key(seed), 3)
    scale = 1.0 + 0.1 * jax.random.normal(k_scale, (c["c_out"],), jnp.float32)
    volume = jax.random.normal(k_volume, (c["n"], c["c_in"], c["d"], c["h"], c["w"]), jnp.float32)
    filters = jax.random.normal(k_filters, (c["c_out"], c["c_in"], 2, 3, 3), jnp.float32) * 0.1
    return (scale, volume, filters), ()


def computation(scale, volume, filters):
    y = jax.lax.conv_general_dilated(
        volume, filters, (1, 1, 1), "VALID", dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
    centred = y - jnp.mean(y, axis=(2, 3, 4), keepdims=True)
    var = jnp.mean(jnp.square(centred), axis=(2, 3, 4), keepdims=True)
    normed = centred / jnp.sqrt(var + 1e-5)
    return jax.nn.relu(normed * scale[:, None, None, None])
