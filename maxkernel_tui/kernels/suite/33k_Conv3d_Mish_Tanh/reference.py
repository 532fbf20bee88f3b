"""33k_Conv3d_Mish_Tanh: conv3d, mish, tanh (KernelBench L2 #47).

y = conv3d(x, W) (NCDHW/OIDHW, stride 1, VALID) + bias[c];
mish with the naive softplus: y * tanh(log(1 + exp(y))); then tanh. All f32.
"""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 16, "in_channels": 32, "out_channels": 64,
              "depth": 32, "height": 64, "width": 64},
    "check": {"batch": 2, "in_channels": 8, "out_channels": 16,
              "depth": 6, "height": 16, "width": 32},
    "heldout": {"batch": 3, "in_channels": 16, "out_channels": 24,
                "depth": 5, "height": 8, "width": 40},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(
        key_x, (c["batch"], c["in_channels"], c["depth"], c["height"], c["width"]), jnp.float32)
    weight = jax.random.normal(
        key_w, (c["out_channels"], c["in_channels"], 3, 3, 3), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["out_channels"],), jnp.float32) * 0.02
    return (x, weight, bias), ()


def computation(x, weight, bias):
    y = jax.lax.conv_general_dilated(
        x, weight, window_strides=(1, 1, 1), padding="VALID",
        dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
    y = y + bias[:, None, None, None]
    # The benchmark's softplus is the naive log(1 + exp(v)), not logaddexp.
    y = y * jnp.tanh(jnp.log(1.0 + jnp.exp(y)))
    return jnp.tanh(y)
