"""The chunked decayed-scan kernel the built-in agent writes for retention-like scans (RetNet's
multi-scale retention, Mamba-2's SSD in its quadratic form): one parameterised kernel and wrapper
in the manner of jax's pallas/ops/tpu kernels.

    scores[i, j] = (q_i . k_j) * decay(i, j)    for key j <= query i, else 0
    out_i = sum_j weights_dtype(scores[i, j] / divisor(sum_j row_term(scores[i, j]))) v_j

The decay is exp(rate_h * (i - j)) for a per-head log-rate (`rate`, shape (heads,)), or
exp(c_i - c_j) for a per-position cumulative log-decay (`cumulative`, (batch, heads, seq)).
Sequence chunks: grid (batch, head, query chunk, key chunk), key chunks innermost and
'arbitrary'. Within a chunk pair the work is two matmuls with the decay mask between them; what
a query chunk carries from one key chunk to the next (the weighted values and the row
statistic, f32) lives in VMEM scratch, zeroed at key chunk 0 under pl.when and divided once at
the last key chunk the query chunk needs. Key chunks wholly after the query chunk are neither
computed nor fetched (the index maps clamp to the last chunk needed). The row statistic is
whatever the reference sums (|scores| for RetNet, scores for SSD), so no linear state of fixed
size can stand in for it in general: |.| is not linear, so the carried state is per query chunk.

retention_render.py copies these functions into the kernel file unchanged, with the file's own
row_term and divisor functions and BLOCK_Q / BLOCK_KV tunables; tests call them directly in
interpret mode. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.attention import _last_kv_block
from maxkernel_tui.agents.builtin.pieces.blocks import (
    _block_bytes,
    _compiler_params,
    _pick_block,
)

# Preferred query and key chunk lengths: the generated file defines its own under `# Tunables`.
BLOCK_Q = 512
BLOCK_KV = 512
# piece: retention
# The decay's two forms (the `decay` parameter): a log-rate per head, or a cumulative log-decay
# per position.
HEAD_RATE = "head_rate"
CUMULATIVE = "cumulative"
# Lanes a per-head rate is broadcast over, so that its block is one (1, 128) VMEM tile.
RATE_LANES = 128
# end piece


def _decay_block(decay, decay_refs, qi, kj, shape, block_q, block_k):
    """The (block_q, block_k) decay of query chunk qi against key chunk kj, zero above the
    diagonal. decay_refs: the head's rate block, or the chunks' cumulative log-decays (rows
    (block_q, 1), columns (1, block_k))."""
    rows = qi * block_q + jax.lax.broadcasted_iota(jnp.int32, shape, 0)
    cols = kj * block_k + jax.lax.broadcasted_iota(jnp.int32, shape, 1)
    if decay == HEAD_RATE:
        exponent = decay_refs[0][:, :1] * (rows - cols).astype(jnp.float32)
    else:
        exponent = decay_refs[0][...] - decay_refs[1][...]
    return jnp.where(cols <= rows, jnp.exp(exponent), 0.0)


def _start_scan_state(acc_ref, total_ref):
    """At a query chunk's first key chunk: nothing weighted or summed yet."""
    acc_ref[...] = jnp.zeros_like(acc_ref)
    total_ref[...] = jnp.zeros_like(total_ref)


def _retention_kernel(*refs, block_q, block_k, decay, row_term, divisor, weights_dtype, two_pass):
    """One query chunk against one key chunk. refs: q, k, v, the decay's refs (one for
    HEAD_RATE, two for CUMULATIVE), the output, then the weighted-values and row-statistic
    scratch. In one pass (not `two_pass`) each row is divided once, at the end: the f32 sum of
    weights_dtype(scores) v over the divisor, which equals the reference's sum of
    weights_dtype(scores / divisor) v up to the rounding of the weights (fine where no row's
    statistic cancels: a sum of |scores|). With `two_pass`, the key axis runs twice: the first
    pass sums the row statistic, the second divides each chunk's scores before rounding them,
    as the reference does (a signed sum can cancel far below the scores it sums)."""
    q_ref, k_ref, v_ref = refs[:3]
    decay_refs = refs[3:-3]
    o_ref, acc_ref, total_ref = refs[-3:]
    qi, step = pl.program_id(2), pl.program_id(3)
    if two_pass:
        chunks = jax.lax.div(pl.num_programs(3), 2)
        kj, summing = jax.lax.rem(step, chunks), step < chunks
    else:
        kj, summing = step, True
    last = _last_kv_block(qi, block_q, block_k)
    needed = kj <= last

    @pl.when(step == 0)
    def _start():
        _start_scan_state(acc_ref, total_ref)

    def decayed_scores():
        scores = jax.lax.dot_general(
            q_ref[...], k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )
        return scores * _decay_block(decay, decay_refs, qi, kj, scores.shape, block_q, block_k)

    def weigh(weights):
        acc_ref[...] += jnp.dot(
            weights.astype(weights_dtype), v_ref[...], preferred_element_type=jnp.float32
        )

    if two_pass:

        @pl.when(jnp.logical_and(summing, needed))
        def _sum():
            total_ref[...] += jnp.sum(row_term(decayed_scores()), axis=1, keepdims=True)

        @pl.when(jnp.logical_and(jnp.logical_not(summing), needed))
        def _weigh():
            weigh(decayed_scores() / divisor(total_ref[...]))

        @pl.when(jnp.logical_and(jnp.logical_not(summing), kj == last))
        def _finish():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    else:

        @pl.when(needed)
        def _accumulate():
            scores = decayed_scores()
            total_ref[...] += jnp.sum(row_term(scores), axis=1, keepdims=True)
            weigh(scores)

        @pl.when(kj == last)
        def _finish():
            o_ref[...] = (acc_ref[...] / divisor(total_ref[...])).astype(o_ref.dtype)


def _retention(
    q,
    k,
    v,
    rate=None,
    cumulative=None,
    *,
    out_dtype,
    row_term,
    divisor,
    weights_dtype=jnp.bfloat16,
    two_pass=False,
):
    """The decayed causal scan of q, k (batch, heads, seq, dim) over v (batch, heads, seq,
    value dim), with a per-head log-rate `rate` (heads,) or a cumulative log-decay `cumulative`
    (batch, heads, seq). row_term: what each row sums of its scores; divisor: the row's divisor
    from that sum ((rows, 1) f32 in, out). two_pass: sum the statistic over every key chunk
    first, then divide the scores before rounding them (where the statistic can cancel).
    Returns (batch, heads, seq, value dim) `out_dtype`."""
    batch, heads, seq, head_size = q.shape
    value_size = v.shape[-1]
    block_q = _pick_block(seq, BLOCK_Q, 8 * max(1, 4 // q.dtype.itemsize))
    block_k = _pick_block(seq, BLOCK_KV, 128)
    key_chunks = seq // block_k

    def kv_index(i, j):
        """The key chunk query chunk i reads at step j (of either pass), clamped to the last
        one it needs."""
        return jnp.minimum(jax.lax.rem(j, key_chunks), _last_kv_block(i, block_q, block_k))

    def query_block(b, h, i, j):
        """Query (and output) chunk i of head h."""
        return b, h, i, 0

    def kv_block(b, h, i, j):
        """Key or value chunk of head h that query chunk i reads at step j."""
        return b, h, kv_index(i, j), 0

    def rate_block(b, h, i, j):
        """Head h's log-rate, broadcast over one row of lanes."""
        return h, 0, 0

    def key_decay_block(b, h, i, j):
        """The cumulative log-decay of the key chunk read at step j, as one row."""
        return b, h, 0, kv_index(i, j)

    operands = [q, k, v]
    in_specs = [
        pl.BlockSpec((None, None, block_q, head_size), query_block),
        pl.BlockSpec((None, None, block_k, head_size), kv_block),
        pl.BlockSpec((None, None, block_k, value_size), kv_block),
    ]
    blocks = (
        2 * _block_bytes(block_q, head_size, q.dtype)  # query and output
        + _block_bytes(block_k, head_size, k.dtype)
        + _block_bytes(block_k, value_size, v.dtype)
    )
    if rate is not None:
        decay = HEAD_RATE
        rates = jnp.broadcast_to(rate.astype(jnp.float32)[:, None, None], (heads, 1, RATE_LANES))
        operands.append(rates)
        in_specs.append(pl.BlockSpec((None, 1, RATE_LANES), rate_block))
        blocks += _block_bytes(1, RATE_LANES, jnp.float32)
    else:
        decay = CUMULATIVE
        cumulative = cumulative.astype(jnp.float32)
        operands += [cumulative[..., None], cumulative[:, :, None, :]]
        in_specs += [
            pl.BlockSpec((None, None, block_q, 1), query_block),
            pl.BlockSpec((None, None, 1, block_k), key_decay_block),
        ]
        blocks += _block_bytes(block_q, 1, jnp.float32) + _block_bytes(1, block_k, jnp.float32)
    # Two buffers per block, the f32 scratch, ~4 f32 (block_q, block_k) temporaries.
    footprint = (
        2 * blocks
        + _block_bytes(block_q, value_size, jnp.float32)
        + _block_bytes(block_q, 1, jnp.float32)
        + 4 * _block_bytes(block_q, block_k, jnp.float32)
    )
    kernel = functools.partial(
        _retention_kernel,
        block_q=block_q,
        block_k=block_k,
        decay=decay,
        row_term=row_term,
        divisor=divisor,
        weights_dtype=weights_dtype,
        two_pass=two_pass,
    )
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((batch, heads, seq, value_size), out_dtype),
        grid=(batch, heads, seq // block_q, (2 if two_pass else 1) * key_chunks),
        in_specs=in_specs,
        out_specs=pl.BlockSpec((None, None, block_q, value_size), query_block),
        scratch_shapes=[
            pltpu.VMEM((block_q, value_size), jnp.float32),
            pltpu.VMEM((block_q, 1), jnp.float32),
        ],
        compiler_params=_compiler_params(
            ("parallel", "parallel", "parallel", "arbitrary"), footprint
        ),
    )(*operands)


def _start_carried_state(state_ref, key_sum_ref, last_ref):
    """Before the first chunk: nothing carried."""
    state_ref[...] = jnp.zeros_like(state_ref)
    key_sum_ref[...] = jnp.zeros_like(key_sum_ref)
    last_ref[...] = jnp.zeros_like(last_ref)


def _state_scan_kernel(
    q_ref,
    k_ref,
    v_ref,
    rows_ref,
    cols_ref,
    o_ref,
    state_ref,
    key_sum_ref,
    last_ref,
    *,
    chunk,
    divisor,
    weights_dtype,
):
    """One chunk of the sequence: its own scores as two matmuls with the decay mask between
    them, plus what the chunks before it left in the carried state: S = sum_j exp(c_end - c_j)
    k_j v_j^T and z = sum_j exp(c_end - c_j) k_j up to the previous chunk's end c_end (a row's
    sum of scores over earlier keys is exp(c_i - c_end) q_i . z). Then the state moves on to
    this chunk's end. refs: q, k, v, the chunk's cumulative log-decays as rows (chunk, 1) and as
    a row (1, chunk), the output, then the state (dim, value dim), z (1, dim) and c_end (1, 1)
    scratch."""
    t = pl.program_id(2)

    @pl.when(t == 0)
    def _start():
        _start_carried_state(state_ref, key_sum_ref, last_ref)

    q = q_ref[...]
    scores = jax.lax.dot_general(
        q, k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
    )
    scores = scores * _decay_block(
        CUMULATIVE, (rows_ref, cols_ref), t, t, scores.shape, chunk, chunk
    )
    # Decay from the previous chunk's end to each row; nothing is carried into the first chunk.
    carried = jnp.where(t > 0, jnp.exp(rows_ref[...] - last_ref[...]), 0.0)
    earlier = jnp.sum(q.astype(jnp.float32) * key_sum_ref[...], axis=1, keepdims=True)
    # The whole row's statistic is known before any weight is rounded: divide first, as the
    # reference does.
    row_divisor = divisor(jnp.sum(scores, axis=1, keepdims=True) + carried * earlier)
    own = jnp.dot(
        (scores / row_divisor).astype(weights_dtype), v_ref[...], preferred_element_type=jnp.float32
    )
    before = jnp.dot(q, state_ref[...].astype(q.dtype), preferred_element_type=jnp.float32)
    o_ref[...] = (own + carried * before / row_divisor).astype(o_ref.dtype)

    end = rows_ref[chunk - 1 : chunk, :]
    fade = jnp.where(t > 0, jnp.exp(end - last_ref[...]), 0.0)
    weighted = k_ref[...].astype(jnp.float32) * jnp.exp(end - rows_ref[...])
    state_ref[...] = fade * state_ref[...] + jax.lax.dot_general(
        weighted.astype(v_ref.dtype),
        v_ref[...],
        (((0,), (0,)), ((), ())),
        preferred_element_type=jnp.float32,
    )
    key_sum_ref[...] = fade * key_sum_ref[...] + jnp.sum(weighted, axis=0, keepdims=True)
    last_ref[...] = end


def _state_scan(q, k, v, cumulative, *, out_dtype, divisor, weights_dtype=jnp.bfloat16):
    """The decayed causal scan of q, k (batch, heads, seq, dim) over v (batch, heads, seq,
    value dim) with a cumulative log-decay (batch, heads, seq), where each row's statistic is
    the plain sum of its scores (linear in the scores, so a fixed-size state carries it):
    chunks of BLOCK_Q in sequence order, the state carried in VMEM scratch. divisor: the row's
    divisor from that sum. Returns (batch, heads, seq, value dim) `out_dtype`."""
    batch, heads, seq, head_size = q.shape
    value_size = v.shape[-1]
    chunk = _pick_block(seq, BLOCK_Q, 128)

    def chunk_block(b, h, t):
        """Chunk t of head h."""
        return b, h, t, 0

    def decay_row_block(b, h, t):
        """Chunk t's cumulative log-decay as one row."""
        return b, h, 0, t

    cumulative = cumulative.astype(jnp.float32)
    blocks = (
        2 * _block_bytes(chunk, head_size, q.dtype)
        + 2 * _block_bytes(chunk, value_size, v.dtype)
        + _block_bytes(chunk, 1, jnp.float32)
        + _block_bytes(1, chunk, jnp.float32)
    )
    # Two buffers per block, the f32 state, ~4 f32 (chunk, chunk) temporaries.
    footprint = (
        2 * blocks
        + _block_bytes(head_size, value_size, jnp.float32)
        + 4 * _block_bytes(chunk, chunk, jnp.float32)
    )
    kernel = functools.partial(
        _state_scan_kernel, chunk=chunk, divisor=divisor, weights_dtype=weights_dtype
    )
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((batch, heads, seq, value_size), out_dtype),
        grid=(batch, heads, seq // chunk),
        in_specs=[
            pl.BlockSpec((None, None, chunk, head_size), chunk_block),
            pl.BlockSpec((None, None, chunk, head_size), chunk_block),
            pl.BlockSpec((None, None, chunk, value_size), chunk_block),
            pl.BlockSpec((None, None, chunk, 1), chunk_block),
            pl.BlockSpec((None, None, 1, chunk), decay_row_block),
        ],
        out_specs=pl.BlockSpec((None, None, chunk, value_size), chunk_block),
        scratch_shapes=[
            pltpu.VMEM((head_size, value_size), jnp.float32),
            pltpu.VMEM((1, head_size), jnp.float32),
            pltpu.VMEM((1, 1), jnp.float32),
        ],
        compiler_params=_compiler_params(("parallel", "parallel", "arbitrary"), footprint),
    )(q, k, v, cumulative[..., None], cumulative[:, :, None, :])
