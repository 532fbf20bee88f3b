import jax
import jax.numpy as jnp


def computation(queries, kv_lens, page_indices, cu_q_lens, k_pages, v_pages, group):
    # Written for maxkernel-tui's tests in MaxKernel's adapted style: ragged paged attention of
    # a serving step (decodes and prefill chunks packed in one query buffer), the caches after
    # the offsets, each key-value head repeated for its query group, the scale a division.
    n_tokens, n_heads, head_dim = queries.shape
    _, page_size, n_kv_heads, _ = k_pages.shape
    n_seqs, pages_per_seq = page_indices.shape
    tok = jnp.arange(n_tokens)
    seq = jnp.clip(jnp.searchsorted(cu_q_lens, tok, side="right") - 1, 0, n_seqs - 1)
    q_len = cu_q_lens[seq + 1] - cu_q_lens[seq]
    last = kv_lens[seq] - q_len + (tok - cu_q_lens[seq])
    keys = k_pages[page_indices[seq]].reshape(n_tokens, pages_per_seq * page_size, n_kv_heads, head_dim)
    vals = v_pages[page_indices[seq]].reshape(n_tokens, pages_per_seq * page_size, n_kv_heads, head_dim)
    keys = jnp.repeat(keys, group, axis=2)
    vals = jnp.repeat(vals, group, axis=2)
    logits = jnp.einsum("thd,tshd->ths", queries, keys, preferred_element_type=jnp.float32)
    logits = logits / jnp.sqrt(jnp.float32(head_dim))
    pos = jnp.arange(pages_per_seq * page_size)
    allowed = (pos[None, :] <= last[:, None]) & (pos[None, :] < kv_lens[seq][:, None])
    logits = jnp.where(allowed[:, None, :], logits, -1e9)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("ths,tshd->thd", probs, vals.astype(jnp.float32)).astype(queries.dtype)
