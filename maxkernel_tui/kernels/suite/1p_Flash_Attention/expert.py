"""Expert baseline for 1p_Flash_Attention: jax's own Pallas TPU flash attention.

jax.experimental.pallas.ops.tpu.flash_attention, causal, with JAXBench's tuned blocks (block_q
2048, block_k_major 2048, block_k 1024, one batch per block). The task's layout (batch, heads,
seq, head_dim) is the kernel's. A tuned block longer than the sequence (the small check shapes)
is cut to the largest multiple of 128 that divides it, or to the whole sequence.
"""
from jax.experimental.pallas.ops.tpu.flash_attention import BlockSizes, flash_attention

BLOCK_Q, BLOCK_K_MAJOR, BLOCK_K = 2048, 2048, 1024


def _block(dim, tuned):
    """The largest multiple of 128 up to `tuned` that divides `dim`; `dim` itself if none."""
    for size in range(min(tuned, dim) // 128 * 128, 0, -128):
        if dim % size == 0:
            return size
    return dim


def computation(query, key, value):
    seq, head_dim = query.shape[-2:]
    k_major = _block(seq, BLOCK_K_MAJOR)
    blocks = BlockSizes(
        block_q=_block(seq, BLOCK_Q),
        block_k_major=k_major,
        block_k=_block(k_major, BLOCK_K),
        block_b=1,
    )
    return flash_attention(
        query, key, value, causal=True, sm_scale=head_dim**-0.5, block_sizes=blocks
    )
