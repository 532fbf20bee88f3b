"""Expert baseline for 2p_GQA_Attention: jax's own Pallas TPU splash attention.

As JAXBench's 2p optimized.py: K and V repeated to every query head, splash attention (multi-head,
causal) with block_q = block_kv = 2048 and block_kv_compute 1024. JAXBench vmaps over the batch;
here the batch is folded into the heads (the same kernel; jax 0.10.2's TPU interpret mode
mis-handles a vmapped splash call). The task's (batch, seq, heads, head_dim) inputs are moved to
the kernel's (heads, seq, head_dim) and back; splash attention does not scale the logits, so q is scaled first (by the bf16 1/sqrt(D) the
reference uses). A tuned block longer than the sequence is cut to the largest multiple of 128
that divides it, or to the whole sequence.
"""
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import splash_attention as splash

BLOCK_Q, BLOCK_KV, BLOCK_KV_COMPUTE = 2048, 2048, 1024


def _block(dim, tuned):
    """The largest multiple of 128 up to `tuned` that divides `dim`; `dim` itself if none."""
    for size in range(min(tuned, dim) // 128 * 128, 0, -128):
        if dim % size == 0:
            return size
    return dim


def computation(query, key, value):
    batch, seq, q_heads, head_dim = query.shape
    group = q_heads // key.shape[2]
    block_kv = _block(seq, BLOCK_KV)
    blocks = splash.BlockSizes(
        block_q=_block(seq, BLOCK_Q),
        block_kv=block_kv,
        block_kv_compute=_block(block_kv, BLOCK_KV_COMPUTE),
    )
    mask = splash.MultiHeadMask([splash.CausalMask((seq, seq))] * (batch * q_heads))
    kernel = splash.make_splash_mha_single_device(mask, block_sizes=blocks)
    scale = jnp.asarray(head_dim**-0.5, jnp.bfloat16)

    def heads_first(x):  # (batch, seq, heads, d) -> (batch * heads, seq, d)
        return jnp.swapaxes(x, 1, 2).reshape(batch * q_heads, seq, head_dim)

    q = heads_first(query * scale)
    k = heads_first(jnp.repeat(key, group, axis=2))
    v = heads_first(jnp.repeat(value, group, axis=2))
    out = kernel(q, k, v).reshape(batch, q_heads, seq, head_dim)
    return jnp.swapaxes(out, 1, 2)
