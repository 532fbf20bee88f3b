"""The flash-attention kernel the built-in agent writes, one parameterised kernel and wrapper in
the manner of jax's pallas/ops/tpu/flash_attention.py: softmax(mask(scale * Q K^T + bias)) V
with an online softmax over key blocks (running max and sum in f32 VMEM scratch, the output
accumulated in f32 and divided once at the last key block).

Grid (batch, query head, query block, key block), key blocks innermost and 'arbitrary'; query
head h reads key head h // group. Trace-time `if`s choose what a task needs: a scale, an
additive bias, logits rounded where the reference rounds them, a causal mask (key blocks wholly
above the diagonal are neither fetched, their index map clamping to the last block needed, nor
computed; only blocks crossing it build the mask), inputs laid out (batch, seq, heads, dim).

render (attention_render.py) copies these functions into the kernel file unchanged, with
blocks.py's helpers and the file's BLOCK_Q / BLOCK_KV tunables, and calls `_flash_attention`
with the task's parameters; tests call them directly in interpret mode. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _pick_block,
)

# Preferred query and key/value block lengths: the generated file defines its own under
# `# Tunables`.
BLOCK_Q = 512
BLOCK_KV = 512


def _last_kv_block(q_block, block_q, block_k):
    """The last key block a query block needs under the causal mask."""
    # lax.div: both operands are non-negative, and `//` on traced integers lowers through sign.
    return jax.lax.div(q_block * block_q + block_q - 1, block_k)


def _start_statistics(max_ref, sum_ref, acc_ref):
    """At a query block's first key block: no maximum yet, nothing summed or accumulated."""
    max_ref[...] = jnp.full_like(max_ref, -jnp.inf)
    sum_ref[...] = jnp.zeros_like(sum_ref)
    acc_ref[...] = jnp.zeros_like(acc_ref)


def _block_logits(q_ref, k_ref):
    """Q K^T of one query block and one key block, in f32, without transposing K."""
    return jax.lax.dot_general(
        q_ref[...], k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
    )


def _causal_mask(logits, qi, kj, block_q, block_k, mask_value):
    """The logits of keys after their query replaced by `mask_value`."""
    rows = qi * block_q + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 0)
    cols = kj * block_k + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
    return jnp.where(cols <= rows, logits, mask_value)


def _online_softmax_step(logits, max_ref, sum_ref, acc_ref, v_ref):
    """Fold one key block in: rescale what is summed so far to the new running maximum."""
    previous = max_ref[...]
    current = jnp.maximum(previous, jnp.max(logits, axis=1, keepdims=True))
    rescale = jnp.exp(previous - current)
    weights = jnp.exp(logits - current)
    sum_ref[...] = rescale * sum_ref[...] + jnp.sum(weights, axis=1, keepdims=True)
    acc_ref[...] = rescale * acc_ref[...] + jnp.dot(
        weights.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32
    )
    max_ref[...] = current


def _finish_output(o_ref, acc_ref, sum_ref):
    """After the last key block: the accumulated output divided by the softmax's sum."""
    o_ref[...] = (acc_ref[...] / sum_ref[...]).astype(o_ref.dtype)


def _attention_kernel(*refs, block_q, block_k, scale, has_bias, causal, mask_value, logits_dtype):
    """One query block against one key block: update the running max, sum and output. refs:
    q, k, v, the bias when `has_bias`, the output, then the max, sum and output scratch.
    `logits_dtype`: where the reference rounds its f32 logits (None: it does not)."""
    q_ref, k_ref, v_ref = refs[:3]
    o_ref, max_ref, sum_ref, acc_ref = refs[-4:]
    qi, kj = pl.program_id(2), pl.program_id(3)

    def as_reference(logits):
        if logits_dtype is None:
            return logits
        return logits.astype(logits_dtype).astype(jnp.float32)

    @pl.when(kj == 0)
    def _start_row_block():
        _start_statistics(max_ref, sum_ref, acc_ref)

    def _attend(masked):
        logits = as_reference(_block_logits(q_ref, k_ref))
        if scale is not None:
            logits = as_reference(logits * scale)
        if has_bias:
            logits = as_reference(logits + refs[3][...].astype(jnp.float32))
        if masked:
            logits = _causal_mask(logits, qi, kj, block_q, block_k, mask_value)
        _online_softmax_step(logits, max_ref, sum_ref, acc_ref, v_ref)

    if causal:
        # Blocks wholly below the diagonal need no mask; blocks wholly above it are skipped.
        below = kj * block_k + block_k - 1 <= qi * block_q
        crossing = jnp.logical_and(
            kj * block_k <= qi * block_q + block_q - 1, jnp.logical_not(below)
        )
        pl.when(below)(functools.partial(_attend, False))
        pl.when(crossing)(functools.partial(_attend, True))
        last = _last_kv_block(qi, block_q, block_k)
    else:
        _attend(False)
        last = pl.num_programs(3) - 1

    @pl.when(kj == last)
    def _finish_row_block():
        _finish_output(o_ref, acc_ref, sum_ref)


def _flash_attention(
    q,
    k,
    v,
    bias=None,
    *,
    out_dtype,
    scale=None,
    causal=False,
    mask_value=-jnp.inf,
    logits_dtype=None,
    seq_first=False,
):
    """Attention of q (batch, heads, seq, dim) over k and v (batch, key heads, seq, dim), or all
    three (batch, seq, heads, dim) when `seq_first`; v's dim may differ from q's and k's (MLA);
    bias (heads, seq, seq) or (batch, heads, seq, seq), a size-1 batch or head axis shared.
    Returns q's layout with v's dim, in `out_dtype`."""
    if seq_first:  # the kernel's blocks want (seq, dim) last: heads move before the sequence
        q, k, v = (jnp.swapaxes(t, 1, 2) for t in (q, k, v))
    batch, heads, seq, head_size = q.shape
    value_size = v.shape[-1]
    group = heads // k.shape[1]
    if scale is not None and logits_dtype is not None:
        # The reference's rounded logits meet the scale rounded to their dtype.
        scale = float(jnp.dtype(logits_dtype).type(scale))
    block_q = _pick_block(seq, BLOCK_Q, 8 * max(1, 4 // q.dtype.itemsize))
    block_k = _pick_block(seq, BLOCK_KV, 128)

    def kv_index(i, j):
        """The key block query block i reads at step j (under the causal mask, clamped to the
        last block it needs: the blocks after it are not fetched)."""
        return jnp.minimum(j, _last_kv_block(i, block_q, block_k)) if causal else j

    def query_block(b, h, i, j):
        """Query (and output) block i of head h."""
        return b, h, i, 0

    def kv_block(b, h, i, j):
        """Key/value block of the key head that query head h reads."""
        # lax.div: `//` on traced integers lowers through sign, which Mosaic lacks here.
        return b, jax.lax.div(h, group), kv_index(i, j), 0

    def bias_block(b, h, i, j):
        """The bias for query block i and key block j of head h (or of its shared axes)."""
        lead = (b if bias.shape[0] != 1 else 0,) if bias.ndim == 4 else ()
        return (*lead, h if bias.shape[-3] != 1 else 0, i, kv_index(i, j))

    operands = [q, k, v]
    in_specs = [
        pl.BlockSpec((None, None, block_q, head_size), query_block),
        pl.BlockSpec((None, None, block_k, head_size), kv_block),
        pl.BlockSpec((None, None, block_k, value_size), kv_block),
    ]
    blocks = (
        _block_bytes(block_q, head_size, q.dtype)
        + _block_bytes(block_k, head_size, k.dtype)
        + _block_bytes(block_k, value_size, v.dtype)
    )
    if bias is not None:
        operands.append(bias)
        lead = (None,) * (bias.ndim - 2)
        in_specs.append(pl.BlockSpec((*lead, block_q, block_k), bias_block))
        blocks += _block_bytes(block_q, block_k, bias.dtype)
    blocks += _block_bytes(block_q, value_size, out_dtype)  # the output block
    # Two buffers per block, f32 statistics and output accumulator, ~3 f32 logits temporaries.
    footprint = 2 * blocks + (
        2 * _block_bytes(block_q, 1, jnp.float32)
        + _block_bytes(block_q, value_size, jnp.float32)
        + 3 * _block_bytes(block_q, block_k, jnp.float32)
    )
    kernel = functools.partial(
        _attention_kernel,
        block_q=block_q,
        block_k=block_k,
        scale=scale,
        has_bias=bias is not None,
        causal=causal,
        mask_value=mask_value,
        logits_dtype=logits_dtype,
    )
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((batch, heads, seq, value_size), out_dtype),
        grid=(batch, heads, seq // block_q, seq // block_k),
        in_specs=in_specs,
        out_specs=pl.BlockSpec((None, None, block_q, value_size), query_block),
        scratch_shapes=[
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, value_size), jnp.float32),
        ],
        compiler_params=_compiler_params(
            ("parallel", "parallel", "parallel", "arbitrary"), footprint
        ),
    )(*operands)
    return jnp.swapaxes(out, 1, 2) if seq_first else out
