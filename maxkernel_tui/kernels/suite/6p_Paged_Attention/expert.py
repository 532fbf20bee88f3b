"""Expert baseline for 6p_Paged_Attention: jax's own Pallas TPU paged attention (decode).

jax.experimental.pallas.ops.tpu.paged_attention with JAXBench's 128 pages per compute block.
Layouts adapted: each sequence's query row is gathered (cu_q_lens), the task's
(pages, page_size, kv_heads, head_dim) caches move to the kernel's (kv_heads, pages, page_size,
head_dim), and q is scaled first (the kernel does not scale; bf16 1/sqrt(D) as the reference).
A tuned block longer than a sequence's page table is cut to its largest divisor.
"""
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention

PAGES_PER_COMPUTE_BLOCK = 128


def _divisor(dim, tuned):
    """The largest divisor of `dim` up to `tuned`."""
    return next(size for size in range(min(tuned, dim), 0, -1) if dim % size == 0)


def computation(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens,
                num_seqs, num_q_heads, num_kv_heads, head_dim, max_seq_len):
    scale = jnp.asarray(head_dim**-0.5, jnp.bfloat16)
    q = queries[cu_q_lens[:num_seqs]] * scale  # (num_seqs, q_heads, head_dim)
    k = jnp.transpose(k_pages, (2, 0, 1, 3))  # (kv_heads, pages, page_size, head_dim)
    v = jnp.transpose(v_pages, (2, 0, 1, 3))
    block = _divisor(page_indices.shape[1], PAGES_PER_COMPUTE_BLOCK)
    return paged_attention(q, k, v, kv_lens, page_indices, pages_per_compute_block=block)
