"""Expert baseline for 4p_Sparse_Attention: jax's own Pallas TPU splash attention.

JAXBench's tuned splash blocks (block_q = block_kv = 2048, block_kv_compute 1024), causal mask,
grouped-query heads served by the kernel itself (query head h reads kv head h // (H_q / H_kv)),
the batch folded into the heads (batch b's query head h is head b * H_q + h, which reads kv head
b * H_kv + h // group: the same grouping; jax 0.10.2's TPU interpret mode mis-handles a vmapped
splash call). q arrives pre-scaled, as splash attention expects. A tuned block longer
than the sequence is cut to the largest multiple of 128 that divides it, or to the whole sequence.
"""
from jax.experimental.pallas.ops.tpu import splash_attention as splash

BLOCK_Q, BLOCK_KV, BLOCK_KV_COMPUTE = 2048, 2048, 1024


def _block(dim, tuned):
    """The largest multiple of 128 up to `tuned` that divides `dim`; `dim` itself if none."""
    for size in range(min(tuned, dim) // 128 * 128, 0, -128):
        if dim % size == 0:
            return size
    return dim


def computation(q, k, v, S, H_q, H_kv, D):
    block_kv = _block(S, BLOCK_KV)
    blocks = splash.BlockSizes(
        block_q=_block(S, BLOCK_Q),
        block_kv=block_kv,
        block_kv_compute=_block(block_kv, BLOCK_KV_COMPUTE),
    )
    batch = q.shape[0]
    mask = splash.MultiHeadMask([splash.CausalMask((S, S))] * (batch * H_q))
    kernel = splash.make_splash_mha_single_device(mask, block_sizes=blocks)
    out = kernel(q.reshape(batch * H_q, S, D), k.reshape(batch * H_kv, S, D),
                 v.reshape(batch * H_kv, S, D))
    return out.reshape(batch, H_q, S, D)
