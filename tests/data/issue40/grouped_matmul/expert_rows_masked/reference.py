"""Rows of `x` handed to experts in consecutive runs of `counts` rows; each expert's rows times
its own weight. Written densely: every expert's product on every row, kept where the row is
that expert's (a mask from the runs' bounds)."""
import jax
import jax.numpy as jnp
import numpy as np

CONFIGS = {
    "bench": {"experts": 16, "run": 512, "hidden": 1024, "out": 768},
    "check": {"experts": 5, "run": 40, "hidden": 128, "out": 256},
    "heldout": {"experts": 3, "run": 72, "hidden": 256, "out": 128},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    rng = np.random.default_rng(len(config))  # fixed run lengths: fixed shapes
    counts = rng.integers(0, 2 * c["run"], c["experts"]).astype(np.int32)
    key_x, key_w = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(key_x, (int(counts.sum()), c["hidden"]), jnp.float32)
    w = jax.random.normal(key_w, (c["experts"], c["hidden"], c["out"]), jnp.float32) * 0.05
    return (jnp.asarray(counts), x, w), ()


def computation(counts, x, w):
    ends = jnp.cumsum(counts)
    row = jnp.arange(x.shape[0])[:, None]
    owned = (row >= (ends - counts)[None, :]) & (row < ends[None, :])  # (rows, experts)
    every = jnp.einsum("rh,eho->reo", x, w, precision=jax.lax.Precision.HIGHEST)
    return jnp.sum(jnp.where(owned[..., None], every, 0.0), axis=1)
