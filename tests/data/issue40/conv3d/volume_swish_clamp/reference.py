"""volume_swish_clamp: a 3-D convolution with an uneven (2, 3, 3) kernel, a per-channel shift
subtracted, swish, then a clamp to [-1, 1] (an own task for the 3-D convolution family: the
shift comes first among the arguments and the volume last)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"n": 4, "c_in": 16, "c_out": 24, "d": 12, "h": 20, "w": 36},
    "check": {"n": 2, "c_in": 8, "c_out": 16, "d": 5, "h": 10, "w": 20},
    "heldout": {"n": 3, "c_in": 8, "c_out": 8, "d": 4, "h": 12, "w": 24},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    k_shift, k_filters, k_volume = jax.random.split(jax.random.key(seed), 3)
    shift = jax.random.normal(k_shift, (c["c_out"],), jnp.float32) * 0.1
    filters = jax.random.normal(k_filters, (c["c_out"], c["c_in"], 2, 3, 3), jnp.float32) * 0.05
    volume = jax.random.normal(k_volume, (c["n"], c["c_in"], c["d"], c["h"], c["w"]), jnp.float32)
    return (shift, filters, volume), ()


def computation(shift, filters, volume):
    y = jax.lax.conv_general_dilated(
        volume, filters, (1, 1, 1), "VALID", dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
    y = y - shift[:, None, None, None]
    y = y * jax.nn.sigmoid(y)
    return jnp.clip(y, -1.0, 1.0)
