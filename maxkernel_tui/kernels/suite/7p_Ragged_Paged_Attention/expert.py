"""Expert baseline for 7p_Ragged_Paged_Attention: jax's own Pallas TPU ragged paged attention.

jax.experimental.pallas.ops.tpu.ragged_paged_attention with JAXBench's tuning: 64 kv pages and
64 queries per block, a 32 MiB VMEM limit. The task's inputs are the kernel's own layout
(K and V interleaved as heads 2h and 2h + 1). A tuned block larger than a sequence's page table
or the token budget is cut to its largest divisor.
"""
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import ragged_paged_attention

KV_PAGES_PER_BLOCK, QUERIES_PER_BLOCK = 64, 64
VMEM_LIMIT_BYTES = 32 * 1024 * 1024


def _divisor(dim, tuned):
    """The largest divisor of `dim` up to `tuned`."""
    return next(size for size in range(min(tuned, dim), 0, -1) if dim % size == 0)


def computation(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                head_dim, max_tokens):
    return ragged_paged_attention(
        queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
        sm_scale=head_dim**-0.5,
        num_kv_pages_per_block=_divisor(page_indices.shape[1], KV_PAGES_PER_BLOCK),
        num_queries_per_block=_divisor(max_tokens, QUERIES_PER_BLOCK),
        vmem_limit_bytes=VMEM_LIMIT_BYTES,
    )
