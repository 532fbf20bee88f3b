"""Tokens (not batched) through a top-3 of 8 gated-SiLU experts; the router's softmax written out
by hand, the combine weights from comparisons with the experts' ids. Arguments in another
order than the usual: the up projection before the gate, the router last."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"tokens": 4096, "width": 2048, "inner": 4096, "experts": 8, "chosen": 3},
    "check": {"tokens": 80, "width": 128, "inner": 256, "experts": 8, "chosen": 3},
    "heldout": {"tokens": 56, "width": 256, "inner": 128, "experts": 8, "chosen": 3},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    keys = jax.random.split(jax.random.key(seed), 5)
    n, w, i = c["experts"], c["width"], c["inner"]
    tokens = jax.random.normal(keys[0], (c["tokens"], w), jnp.bfloat16)
    ups = jax.random.normal(keys[1], (n, w, i), jnp.bfloat16) * 0.04
    gates = jax.random.normal(keys[2], (n, w, i), jnp.bfloat16) * 0.04
    downs = jax.random.normal(keys[3], (n, i, w), jnp.bfloat16) * 0.04
    router_w = jax.random.normal(keys[4], (w, n), jnp.bfloat16) * 0.04
    return (tokens, ups, gates, downs, router_w), (c["chosen"],)


def computation(tokens, ups, gates, downs, router_w, chosen):
    f32 = jnp.float32
    scores = jnp.dot(tokens, router_w, preferred_element_type=f32).astype(tokens.dtype)
    best, which = jax.lax.top_k(scores, chosen)
    e = jnp.exp(best - jnp.max(best, axis=-1, keepdims=True))
    share = e / jnp.sum(e, axis=-1, keepdims=True)
    ids = jnp.arange(router_w.shape[1])
    mix = jnp.sum(jnp.where(which[..., None] == ids, share[..., None].astype(f32), 0.0), axis=1)
    g = jnp.einsum("tw,nwi->nti", tokens, gates, preferred_element_type=f32).astype(tokens.dtype)
    u = jnp.einsum("tw,nwi->nti", tokens, ups, preferred_element_type=f32).astype(tokens.dtype)
    act = g * jax.nn.sigmoid(g) * u
    y = jnp.einsum("nti,niw->ntw", act, downs, preferred_element_type=f32).astype(tokens.dtype)
    return jnp.einsum("ntw,tn->tw", y.astype(f32), mix)
