"""decayed_energy_scan: Decayed causal scores with rows divided by the root of their energy (an own task for the scan family)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"b": 1, "n_heads": 6, "length": 1536, "width": 96},
    "check": {"b": 1, "n_heads": 2, "length": 384, "width": 96},
    "heldout": {"b": 2, "n_heads": 3, "length": 256, "width": 96},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    shape = (c["b"], c["n_heads"], c["length"], c["width"])
    keys = jax.random.split(jax.random.key(seed), 3)
    vals, ks, qs = (jax.random.normal(key, shape, jnp.bfloat16) for key in keys)
    return (vals, ks, qs), ()



def computation(vals, ks, qs):
    # Values first, then keys, then queries; rows divided by the root of their energy.
    heads, length = qs.shape[1], qs.shape[2]
    log_rate = jnp.log1p(-jnp.exp2(-(4.0 + jnp.arange(heads, dtype=jnp.float32))))
    lag = (jnp.arange(length)[:, None] - jnp.arange(length)[None, :]).astype(jnp.float32)
    weight = jnp.tril(jnp.exp(log_rate[:, None, None] * lag))
    energy = jnp.einsum("bhld,bhmd->bhlm", qs.astype(jnp.float32), ks.astype(jnp.float32))
    energy = energy * weight
    scale = jnp.maximum(jnp.sqrt(jnp.sum(energy * energy, axis=-1, keepdims=True)), 1.0)
    mixed = jnp.einsum("bhlm,bhmd->bhld", (energy / scale).astype(jnp.bfloat16), vals,
                       preferred_element_type=jnp.float32)
    return mixed.astype(jnp.bfloat16)
