"""14p_Ragged_Dot: equal-size grouped matmul (reference written for maxkernel-tui).

out[g] = x[g] · W[g] for every group g, bf16 inputs, f32 accumulation, bf16 output.
The groups are pre-split evenly, so this is a plain batched matmul.
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape, `check` runs on a CPU
# in well under a second, `heldout` is never shown to an agent.
CONFIGS = {
    "bench": {"groups": 8, "rows": 1024, "k": 4096, "n": 14336},
    "check": {"groups": 4, "rows": 128, "k": 256, "n": 512},
    "heldout": {"groups": 3, "rows": 192, "k": 384, "n": 640},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(key_x, (c["groups"], c["rows"], c["k"]), jnp.bfloat16)
    weights = jax.random.normal(key_w, (c["groups"], c["k"], c["n"]), jnp.bfloat16) * 0.02
    return (x, weights), ()


def computation(x, weights):
    out = jnp.einsum("gmk,gkn->gmn", x, weights, preferred_element_type=jnp.float32)
    return out.astype(jnp.bfloat16)
