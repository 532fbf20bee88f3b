import jax
import jax.numpy as jnp


def computation(block_tables, context_lens, query, key_cache, value_cache, queries_per_kv):
    # Written for maxkernel-tui's tests in MaxKernel's adapted style: paged decode attention,
    # sequences in a batch, one query token each, the query's own row (no row indices).
    n_blocks, block_size, n_kv_heads, dim = key_cache.shape
    batch, blocks_per_seq = block_tables.shape
    keys = jnp.take(key_cache, block_tables, axis=0).reshape(batch, -1, n_kv_heads, dim)
    values = jnp.take(value_cache, block_tables, axis=0).reshape(batch, -1, n_kv_heads, dim)
    keys = jnp.repeat(keys, queries_per_kv, axis=2)
    values = jnp.repeat(values, queries_per_kv, axis=2)
    scores = jnp.einsum('bhd,bthd->bht', query.astype(jnp.float32), keys.astype(jnp.float32))
    scores = scores / jnp.sqrt(jnp.float32(dim))
    positions = jnp.arange(blocks_per_seq * block_size)
    scores = jnp.where(positions[None, None, :] >= context_lens[:, None, None], -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum('bht,bthd->bhd', weights, values.astype(jnp.float32)).astype(query.dtype)
