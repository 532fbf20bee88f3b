"""Latent attention, our own third style: named configurations, its own argument names and
order, per-head dims 64 (no position) + 32 (rotary, interleaved pairs), values 64 wide."""

import math

import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"tokens": 2048, "width": 1024, "n_heads": 8, "latent": 128, "seqs": 1},
    "check": {"tokens": 256, "width": 256, "n_heads": 2, "latent": 128, "seqs": 1},
    "heldout": {"tokens": 128, "width": 384, "n_heads": 3, "latent": 64, "seqs": 2},
}
PLAIN, ROTARY, VALUE, BASE = 64, 32, 64, 500000.0


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    n, r = c["n_heads"], c["latent"]
    shapes = {
        "w_out": (n * VALUE, c["width"]),
        "w_latent": (c["width"], r + ROTARY),
        "w_query": (c["width"], n * (PLAIN + ROTARY)),
        "w_values": (r, n * VALUE),
        "w_keys": (r, n * PLAIN),
    }
    keys = jax.random.split(jax.random.PRNGKey(seed + 11), len(shapes) + 1)
    # The output projection is smaller: the layer's output stays O(1), as a residual branch's.
    scales = {"w_out": 0.02}
    weights = [
        jax.random.normal(k, s, jnp.bfloat16) * scales.get(name, 0.06)
        for k, (name, s) in zip(keys, shapes.items())
    ]
    hidden = jax.random.normal(keys[-1], (c["seqs"], c["tokens"], c["width"]), jnp.bfloat16)
    return (*weights, hidden), (n, BASE)


def _interleaved_rope(t, base):
    tokens, dim = t.shape[1], t.shape[-1]
    freq = base ** (-jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    angle = jnp.arange(tokens, dtype=jnp.float32)[:, None] * freq
    cos = jnp.cos(angle).astype(t.dtype)[None, :, None, :]
    sin = jnp.sin(angle).astype(t.dtype)[None, :, None, :]
    pairs = t.reshape(*t.shape[:-1], dim // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    return jnp.stack([even * cos - odd * sin, odd * cos + even * sin], axis=-1).reshape(t.shape)


def computation(w_out, w_latent, w_query, w_values, w_keys, hidden, n_heads, base):
    seqs, tokens, _ = hidden.shape
    query = jnp.matmul(hidden, w_query).reshape(seqs, tokens, n_heads, PLAIN + ROTARY)
    compressed = jnp.matmul(hidden, w_latent)
    rank = w_keys.shape[0]
    latent, shared = compressed[..., :rank], compressed[..., rank:]
    keys = jnp.matmul(latent, w_keys).reshape(seqs, tokens, n_heads, PLAIN)
    values = jnp.matmul(latent, w_values).reshape(seqs, tokens, n_heads, VALUE)
    shared = _interleaved_rope(shared[:, :, None, :], base)
    keys = jnp.concatenate(
        [keys, jnp.broadcast_to(shared, (seqs, tokens, n_heads, ROTARY))], axis=-1
    )
    query = jnp.concatenate(
        [query[..., :PLAIN], _interleaved_rope(query[..., PLAIN:], base)], axis=-1
    )
    scores = jnp.einsum("sthd,suhd->shtu", query, keys) / math.sqrt(PLAIN + ROTARY)
    later = jnp.arange(tokens)[None, :] > jnp.arange(tokens)[:, None]
    scores = jnp.where(later, -jnp.inf, scores).astype(jnp.float32)
    weights = jnp.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = (weights / weights.sum(axis=-1, keepdims=True)).astype(values.dtype)
    mixed = jnp.einsum("shtu,suhd->sthd", weights, values)
    return jnp.matmul(mixed.reshape(seqs, tokens, n_heads * VALUE), w_out)
