"""Causal flash attention (bf16 in/out) as a Pallas TPU kernel with an f32 online softmax.

Grid (batch, head, q block, kv block), kv innermost. Key blocks entirely above the diagonal
are neither fetched (the kv index map clamps to the last needed block) nor computed.
Logits are rounded like the reference's: bf16(q.k) times bf16(1/sqrt(D)), rounded to bf16.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

_MASK_VALUE = -1e9


def _pick_tile(dim, candidates):
    for tile in candidates:
        if dim % tile == 0:
            return tile
    return dim


def _last_kv_block(q_block, block_q, block_k):
    # lax.div: the operands are non-negative, and `//` on traced ints lowers through sign.
    return jax.lax.div(q_block * block_q + block_q - 1, block_k)


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, block_q,
                  block_k):
    qi, kj = pl.program_id(2), pl.program_id(3)
    q_start, k_start = qi * block_q, kj * block_k

    @pl.when(kj == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    def _attend(apply_mask):
        logits = jax.lax.dot_general(
            q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
            preferred_element_type=jnp.float32)
        logits = logits.astype(jnp.bfloat16).astype(jnp.float32) * scale
        logits = logits.astype(jnp.bfloat16).astype(jnp.float32)
        if apply_mask:
            rows = q_start + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 0)
            cols = k_start + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
            logits = jnp.where(cols <= rows, logits, _MASK_VALUE)
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, jnp.max(logits, axis=1, keepdims=True))
        correction = jnp.exp(m_prev - m_new)
        p = jnp.exp(logits - m_new)
        l_ref[...] = correction * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = correction * acc_ref[...] + jnp.dot(
            p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    # Blocks wholly below the diagonal need no mask; blocks wholly above it are skipped.
    below_diagonal = k_start + block_k - 1 <= q_start
    on_diagonal = jnp.logical_and(k_start <= q_start + block_q - 1,
                                  jnp.logical_not(below_diagonal))
    pl.when(below_diagonal)(functools.partial(_attend, False))
    pl.when(on_diagonal)(functools.partial(_attend, True))

    @pl.when(kj == _last_kv_block(qi, block_q, block_k))
    def _store():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def computation(query, key, value):
    batch, heads, seq, head_dim = query.shape
    block_q = _pick_tile(seq, (512, 256, 128))
    block_k = _pick_tile(seq, (512, 256, 128))
    # The reference multiplies bf16 logits by the scale rounded to bf16.
    scale = float(np.asarray(head_dim ** -0.5, jnp.bfloat16))
    kernel = functools.partial(_flash_kernel, scale=scale, block_q=block_q, block_k=block_k)

    def kv_index(b, h, qi, kj):
        return b, h, jnp.minimum(kj, _last_kv_block(qi, block_q, block_k)), 0

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(query.shape, query.dtype),
        grid=(batch, heads, seq // block_q, seq // block_k),
        in_specs=[
            pl.BlockSpec((None, None, block_q, head_dim), lambda b, h, qi, kj: (b, h, qi, 0)),
            pl.BlockSpec((None, None, block_k, head_dim), kv_index),
            pl.BlockSpec((None, None, block_k, head_dim), kv_index),
        ],
        out_specs=pl.BlockSpec((None, None, block_q, head_dim),
                               lambda b, h, qi, kj: (b, h, qi, 0)),
        scratch_shapes=[
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, head_dim), jnp.float32),
        ],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(query, key, value)
