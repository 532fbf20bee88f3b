"""einsum("ikc,jkc->ijc") of two bf16 pair tensors, a per-channel gate, softmax over channels.

A task of our own, outside the built-in suite: the matmul's batch axis (channels) is the last
axis of both operands and of the result, so a kernel must lay the operands out first. `i` and
`j` differ; `heldout` sizes are no multiples of the `check` ones.
"""

import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"left": 512, "right": 384, "depth": 256, "channels": 128},
    "check": {"left": 128, "right": 256, "depth": 128, "channels": 128},
    "heldout": {"left": 192, "right": 64, "depth": 320, "channels": 128},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_a, key_b, key_g = jax.random.split(jax.random.key(seed), 3)
    scale = c["depth"] ** -0.5
    a = (
        jax.random.normal(key_a, (c["left"], c["depth"], c["channels"]), jnp.float32) * scale
    ).astype(jnp.bfloat16)
    b = jax.random.normal(key_b, (c["right"], c["depth"], c["channels"]), jnp.bfloat16)
    gate = jax.random.normal(key_g, (c["channels"],), jnp.float32)
    return (a, b, gate), ()


def computation(a, b, gate):
    pairs = jnp.einsum("ikc,jkc->ijc", a, b, preferred_element_type=jnp.float32)
    return jax.nn.softmax(pairs * jax.nn.sigmoid(gate), axis=-1).astype(jnp.bfloat16)
