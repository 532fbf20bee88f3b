import jax
import jax.numpy as jnp

# MaxKernel's adapted style: production shapes only, sizes in a module-level dict read by
# subscript, string entries beside them.
CONFIG = {
    'name': 'retnet_retention',
    'model': 'RetNet-style multi-scale retention',
    'batch': 2,
    'num_heads': 8,
    'seq_len': 2048,
    'head_dim': 128,
}


def get_inputs(dtype=jnp.bfloat16):
    k_q, k_k, k_v = jax.random.split(jax.random.key(7), 3)
    shape = (CONFIG['batch'], CONFIG['num_heads'], CONFIG['seq_len'], CONFIG['head_dim'])
    q = jax.random.normal(k_q, shape, dtype=dtype)
    k = jax.random.normal(k_k, shape, dtype=dtype)
    v = jax.random.normal(k_v, shape, dtype=dtype)
    return [q, k, v], []



def computation(q, k, v):
    # Per-head decay from the head index, traced (jnp.arange), not a numpy constant.
    num_heads, seq_len = q.shape[1], q.shape[2]
    gammas = 1.0 - jnp.exp2(-5.0 - jnp.arange(num_heads, dtype=jnp.float32))
    idx = jnp.arange(seq_len)
    dist = (idx[:, None] - idx[None, :]).astype(jnp.float32)
    decay = jnp.exp(dist[None] * jnp.log(gammas)[:, None, None])
    decay = jnp.where(dist[None] >= 0, decay, 0.0)
    qk = jnp.einsum('bhid,bhjd->bhij', q.astype(jnp.float32), k.astype(jnp.float32))
    qk = qk * decay[None]
    qk = qk / jnp.maximum(jnp.abs(qk).sum(axis=-1, keepdims=True), 1.0)
    out = jnp.einsum('bhij,bhjd->bhid', qk.astype(v.dtype), v,
                     preferred_element_type=jnp.float32)
    return out.astype(v.dtype)
