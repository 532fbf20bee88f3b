"""Flash attention for training: a forward kernel that saves each query row's log-sum-exp, and
the two backward kernels in the manner of jax's Pallas TPU flash attention backward, joined by
a custom_vjp. Written for maxkernel-tui; the forward's helpers are pieces/attention.py's.

With P = exp(scale * Q K^T - lse) (masked entries 0) and D = rowsum(dO * O):
    dV = P^T dO      dS = P * (dO V^T - D)      dQ = scale * dS K      dK = scale * dS^T Q
dq kernel: grid (batch, head, query block, key block), keys innermost; it also writes D
(computed from O and dO at a query block's first key block) for the next kernel.
dk/dv kernel: grid (batch, head, key block, query block), queries innermost.
Under the causal mask blocks wholly above the diagonal are neither computed nor fetched: the
index maps clamp to the nearest block needed (the last key block of a query block, the first
query block of a key block), and only blocks crossing the diagonal build the mask. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.attention import (
    _block_logits,
    _causal_mask,
    _finish_output,
    _last_kv_block,
    _online_softmax_step,
    _start_statistics,
)
from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _pick_block,
)

# Preferred query and key/value block lengths: the generated file defines its own.
BLOCK_Q = 512
BLOCK_KV = 512


def _first_q_block(k_block, block_q, block_k):
    """The first query block that sees any key of this key block under the causal mask."""
    return jax.lax.div(k_block * block_k, block_q)


def _causal_cases(qi, kj, block_q, block_k):
    """(below, crossing): the block is wholly below the diagonal (no mask), or crosses it."""
    below = kj * block_k + block_k - 1 <= qi * block_q
    needed = kj * block_k <= qi * block_q + block_q - 1
    return below, jnp.logical_and(needed, jnp.logical_not(below))


def _run_causal(body, causal, qi, kj, block_q, block_k):
    """body(masked) on the blocks the causal mask leaves (all of them when not causal)."""
    if not causal:
        body(False)
        return
    below, crossing = _causal_cases(qi, kj, block_q, block_k)
    pl.when(below)(functools.partial(body, False))
    pl.when(crossing)(functools.partial(body, True))


def _probabilities(q_ref, k_ref, lse_ref, qi, kj, masked, *, scale, block_q, block_k):
    """P of one query block and one key block from the saved lse; masked entries 0."""
    logits = _block_logits(q_ref, k_ref) * scale
    if masked:
        logits = _causal_mask(logits, qi, kj, block_q, block_k, -jnp.inf)
    return jnp.exp(logits - lse_ref[...])


def _score_gradient(p, do_ref, v_ref, d):
    """dS = P * (dO V^T - D) of one query block and one key block."""
    return p * (_block_logits(do_ref, v_ref) - d)


def _backward_block(refs, d, qi, kj, masked, *, scale, block_q, block_k):
    """P and dS of one query block and one key block; `refs` (q, k, v, dO, lse)."""
    q_ref, k_ref, v_ref, do_ref, lse_ref = refs
    p = _probabilities(
        q_ref, k_ref, lse_ref, qi, kj, masked, scale=scale, block_q=block_q, block_k=block_k
    )
    return p, _score_gradient(p, do_ref, v_ref, d)


def _flash_forward_kernel(
    q_ref,
    k_ref,
    v_ref,
    o_ref,
    lse_ref,
    max_ref,
    sum_ref,
    acc_ref,
    *,
    scale,
    causal,
    mask_value,
    block_q,
    block_k,
):
    """Online softmax over key blocks; at the last one the output and each row's lse."""
    qi, kj = pl.program_id(2), pl.program_id(3)

    @pl.when(kj == 0)
    def _start():
        _start_statistics(max_ref, sum_ref, acc_ref)

    def attend(masked):
        logits = _block_logits(q_ref, k_ref) * scale
        if masked:
            logits = _causal_mask(logits, qi, kj, block_q, block_k, mask_value)
        _online_softmax_step(logits, max_ref, sum_ref, acc_ref, v_ref)

    _run_causal(attend, causal, qi, kj, block_q, block_k)
    last = _last_kv_block(qi, block_q, block_k) if causal else pl.num_programs(3) - 1

    @pl.when(kj == last)
    def _finish():
        _finish_output(o_ref, acc_ref, sum_ref)
        lse_ref[...] = max_ref[...] + jnp.log(sum_ref[...])


def _flash_dq_kernel(
    q_ref,
    k_ref,
    v_ref,
    o_ref,
    do_ref,
    lse_ref,
    dq_ref,
    d_ref,
    dq_acc,
    d_acc,
    *,
    scale,
    causal,
    block_q,
    block_k,
):
    """dQ of one query block, summed over key blocks; D = rowsum(dO * O) on the way."""
    qi, kj = pl.program_id(2), pl.program_id(3)

    @pl.when(kj == 0)
    def _start():
        dq_acc[...] = jnp.zeros_like(dq_acc)
        d_acc[...] = jnp.sum(
            o_ref[...].astype(jnp.float32) * do_ref[...].astype(jnp.float32),
            axis=1,
            keepdims=True,
        )

    blocks = {"scale": scale, "block_q": block_q, "block_k": block_k}
    refs = (q_ref, k_ref, v_ref, do_ref, lse_ref)

    def accumulate(masked):
        _, ds = _backward_block(refs, d_acc[...], qi, kj, masked, **blocks)
        dq_acc[...] += jnp.dot(
            ds.astype(k_ref.dtype), k_ref[...], preferred_element_type=jnp.float32
        )

    _run_causal(accumulate, causal, qi, kj, block_q, block_k)
    last = _last_kv_block(qi, block_q, block_k) if causal else pl.num_programs(3) - 1

    @pl.when(kj == last)
    def _finish():
        dq_ref[...] = (dq_acc[...] * scale).astype(dq_ref.dtype)
        d_ref[...] = d_acc[...]


def _transposed_dot(a, b):
    """a^T b, contracting the rows of both, in f32."""
    return jax.lax.dot_general(a, b, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def _flash_dkv_kernel(
    q_ref,
    k_ref,
    v_ref,
    do_ref,
    lse_ref,
    d_ref,
    dk_ref,
    dv_ref,
    dk_acc,
    dv_acc,
    *,
    scale,
    causal,
    block_q,
    block_k,
):
    """dK and dV of one key block, summed over query blocks."""
    kj, qi = pl.program_id(2), pl.program_id(3)

    @pl.when(qi == 0)
    def _start():
        dk_acc[...] = jnp.zeros_like(dk_acc)
        dv_acc[...] = jnp.zeros_like(dv_acc)

    blocks = {"scale": scale, "block_q": block_q, "block_k": block_k}
    refs = (q_ref, k_ref, v_ref, do_ref, lse_ref)

    def accumulate(masked):
        p, ds = _backward_block(refs, d_ref[...], qi, kj, masked, **blocks)
        dv_acc[...] += _transposed_dot(p.astype(do_ref.dtype), do_ref[...])
        dk_acc[...] += _transposed_dot(ds.astype(q_ref.dtype), q_ref[...])

    _run_causal(accumulate, causal, qi, kj, block_q, block_k)

    @pl.when(qi == pl.num_programs(3) - 1)  # the last query block always sees every key
    def _finish():
        dk_ref[...] = (dk_acc[...] * scale).astype(dk_ref.dtype)
        dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)


def _flash_blocks(seq, dtype):
    """Query and key block lengths: divisors of the sequence."""
    return _pick_block(seq, BLOCK_Q, 8 * max(1, 4 // jnp.dtype(dtype).itemsize)), _pick_block(
        seq, BLOCK_KV, 128
    )


def _flash_params(block_q, block_k, head_size, dtype, tiles):
    """The innermost axis a reduction; VMEM for `tiles` double-buffered (block, head) tiles and
    ~4 f32 (query, key) temporaries."""
    tile = _block_bytes(max(block_q, block_k), head_size, dtype)
    footprint = 2 * tiles * tile + 4 * _block_bytes(block_q, block_k, jnp.float32)
    return _compiler_params(("parallel", "parallel", "parallel", "arbitrary"), footprint)


def _attention_specs(block_q, block_k, head_size, q_map, kv_map):
    """The (block, head) tiles of the queries and of the keys and values, and a query block's
    per-row column (lse, D), by the grid's index maps."""
    return (
        pl.BlockSpec((None, None, block_q, head_size), q_map),
        pl.BlockSpec((None, None, block_k, head_size), kv_map),
        pl.BlockSpec((None, None, block_q, 1), q_map),
    )


def _query_major_specs(block_q, block_k, head_size, causal):
    """The specs of a grid (batch, head, query block, key block), keys innermost (the forward
    and dq kernels): under the causal mask a key block past the query block's last is clamped
    to it (not fetched again)."""

    def q_map(b, h, i, j):
        return b, h, i, 0

    def kv_map(b, h, i, j):
        return b, h, jnp.minimum(j, _last_kv_block(i, block_q, block_k)) if causal else j, 0

    return _attention_specs(block_q, block_k, head_size, q_map, kv_map)


def _flash_forward(q, k, v, *, scale, causal, mask_value, out_dtype):
    """q, k, v (batch, heads, seq, dim) -> the output and each query row's lse (f32)."""
    batch, heads, seq, head_size = q.shape
    block_q, block_k = _flash_blocks(seq, q.dtype)
    q_spec, kv_spec, row_spec = _query_major_specs(block_q, block_k, head_size, causal)
    kernel = functools.partial(
        _flash_forward_kernel,
        scale=scale,
        causal=causal,
        mask_value=mask_value,
        block_q=block_q,
        block_k=block_k,
    )
    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct(q.shape, out_dtype),
            jax.ShapeDtypeStruct((batch, heads, seq, 1), jnp.float32),
        ),
        grid=(batch, heads, seq // block_q, seq // block_k),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=(q_spec, row_spec),
        scratch_shapes=[
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, head_size), jnp.float32),
        ],
        compiler_params=_flash_params(block_q, block_k, head_size, q.dtype, 4),
    )(q, k, v)


def _flash_dq(q, k, v, o, do, lse, *, scale, causal):
    """dQ, and D = rowsum(dO * O) per query row (f32, for the dk/dv kernel)."""
    batch, heads, seq, head_size = q.shape
    block_q, block_k = _flash_blocks(seq, q.dtype)
    q_spec, kv_spec, row_spec = _query_major_specs(block_q, block_k, head_size, causal)
    kernel = functools.partial(
        _flash_dq_kernel, scale=scale, causal=causal, block_q=block_q, block_k=block_k
    )
    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((batch, heads, seq, 1), jnp.float32),
        ),
        grid=(batch, heads, seq // block_q, seq // block_k),
        in_specs=[q_spec, kv_spec, kv_spec, q_spec, q_spec, row_spec],
        out_specs=(q_spec, row_spec),
        scratch_shapes=[
            pltpu.VMEM((block_q, head_size), jnp.float32),
            pltpu.VMEM((block_q, 1), jnp.float32),
        ],
        compiler_params=_flash_params(block_q, block_k, head_size, q.dtype, 6),
    )(q, k, v, o, do, lse)


def _flash_dkv(q, k, v, do, lse, d, *, scale, causal):
    """dK and dV."""
    batch, heads, seq, head_size = q.shape
    block_q, block_k = _flash_blocks(seq, q.dtype)

    def q_map(b, h, j, i):
        return b, h, jnp.maximum(i, _first_q_block(j, block_q, block_k)) if causal else i, 0

    def kv_map(b, h, j, i):
        return b, h, j, 0

    q_spec, kv_spec, row_spec = _attention_specs(block_q, block_k, head_size, q_map, kv_map)
    kernel = functools.partial(
        _flash_dkv_kernel, scale=scale, causal=causal, block_q=block_q, block_k=block_k
    )
    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct(k.shape, k.dtype),
            jax.ShapeDtypeStruct(v.shape, v.dtype),
        ),
        grid=(batch, heads, seq // block_k, seq // block_q),
        in_specs=[q_spec, kv_spec, kv_spec, q_spec, row_spec, row_spec],
        out_specs=(kv_spec, kv_spec),
        scratch_shapes=[
            pltpu.VMEM((block_k, head_size), jnp.float32),
            pltpu.VMEM((block_k, head_size), jnp.float32),
        ],
        compiler_params=_flash_params(block_q, block_k, head_size, q.dtype, 7),
    )(q, k, v, do, lse, d)


def _flash_attention_training(
    q, k, v, *, out_dtype, scale=1.0, causal=False, mask_value=-jnp.inf, seq_first=False
):
    """Attention of q, k, v (batch, heads, seq, dim), or (batch, seq, heads, dim) when
    `seq_first`, differentiable in all three through the kernels above."""

    @jax.custom_vjp
    def attention(q, k, v):
        return _flash_forward(
            q, k, v, scale=scale, causal=causal, mask_value=mask_value, out_dtype=out_dtype
        )[0]

    def forward(q, k, v):
        o, lse = _flash_forward(
            q, k, v, scale=scale, causal=causal, mask_value=mask_value, out_dtype=out_dtype
        )
        return o, (q, k, v, o, lse)

    def backward(saved, do):
        q, k, v, o, lse = saved
        dq, d = _flash_dq(q, k, v, o, do, lse, scale=scale, causal=causal)
        dk, dv = _flash_dkv(q, k, v, do, lse, d, scale=scale, causal=causal)
        return dq, dk, dv

    attention.defvjp(forward, backward)
    if seq_first:  # the kernels' blocks want (seq, dim) last: heads move before the sequence
        q, k, v = (jnp.swapaxes(t, 1, 2) for t in (q, k, v))
        return jnp.swapaxes(attention(q, k, v), 1, 2)
    return attention(q, k, v)
