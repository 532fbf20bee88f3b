"""selective_state_scan: Selective-decay state scan in its quadratic form, inputs in their own order (an own task for the scan family)."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"batch": 2, "groups": 24, "steps": 2048, "state": 32, "channels": 128},
    "check": {"batch": 1, "groups": 3, "steps": 256, "state": 32, "channels": 128},
    "heldout": {"batch": 2, "groups": 2, "steps": 384, "state": 32, "channels": 128},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    k_dt, k_b, k_c, k_x = jax.random.split(jax.random.key(seed), 4)
    lead = (c["batch"], c["groups"], c["steps"])
    dt = jax.random.uniform(k_dt, lead, jnp.float32, 0.5, 2.0)
    b_proj = jax.random.normal(k_b, (*lead, c["state"]), jnp.bfloat16)
    c_proj = jax.random.normal(k_c, (*lead, c["state"]), jnp.bfloat16)
    x = jax.random.normal(k_x, (*lead, c["channels"]), jnp.bfloat16)
    return (dt, x, c_proj, b_proj), ()



def computation(dt, x, c_proj, b_proj):
    # Decay exp(-dt) per step: its log is -dt, summed along the steps.
    decay_log = jnp.cumsum(-0.5 * dt, axis=2)
    steps = x.shape[2]
    pos = jnp.arange(steps)
    keep = pos[None, :] <= pos[:, None]
    mask = jnp.exp(jnp.where(keep, decay_log[..., :, None] - decay_log[..., None, :], -1e30))
    scores = jnp.einsum("bgtn,bgsn->bgts", c_proj.astype(jnp.float32), b_proj.astype(jnp.float32))
    scores = scores * mask
    total = jnp.sum(scores, axis=-1, keepdims=True)
    total = jnp.where(jnp.abs(total) < 1e-6, 1.0, total)
    scores = scores / jnp.maximum(jnp.abs(total), 1.0)
    y = jnp.einsum("bgts,bgsc->bgtc", scores.astype(jnp.bfloat16), x,
                   preferred_element_type=jnp.float32)
    return y.astype(jnp.float32)
