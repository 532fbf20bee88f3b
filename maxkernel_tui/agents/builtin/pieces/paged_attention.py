"""The paged-attention decode kernel the built-in agent writes, one parameterised kernel and
wrapper in the manner of jax's pallas/ops/tpu/paged_attention: one query token per sequence
attends over the pages its row of the page table names, with an online softmax over blocks of
pages (running max and sum in f32 VMEM scratch, the output accumulated in f32 and divided once
at the last block).

Scalar prefetch carries the sequence lengths, the page table and each sequence's query row, so
the index maps read them: grid (sequence, page block), page blocks innermost and 'arbitrary'.
A page block is KV_TOKENS_PER_BLOCK tokens of whole pages (at most MAX_PAGE_SLOTS), each its own
pipelined input (the same cache passed once per page slot, its index map naming the page), so
the pipeline fetches the pages a step needs and double-buffers them like any block. Pages past
a sequence's length are neither fetched (the index map clamps to its last page, a block index
that does not change is not fetched again) nor computed (`pl.when`).

A page holds every key head, (page_size, kv_heads, head_dim), viewed as (page_size * kv_heads,
head_dim) rows; all query heads meet all its rows in one matmul and a mask keeps each query
head's own key head (query head h reads key head h // group). Decode is memory-bound: the
matmul is kv_heads times the work it needs, but no transpose of the cache or per-head gather
is paid. When keys and values share one cache (`kv_interleaved`: head 2h is K and 2h + 1 is V
of key head h) the rows are (page_size * 2 * kv_heads) and values are read from the same
block, the weights moved one row on.

render (paged_render.py) copies these functions into the kernel file unchanged, with blocks.py's
helpers, attention.py's online-softmax steps and the file's KV_TOKENS_PER_BLOCK tunable; tests
call them directly in interpret mode. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.attention import (
    _finish_output,
    _online_softmax_step,
    _start_statistics,
)
from maxkernel_tui.agents.builtin.pieces.blocks import _block_bytes, _compiler_params, _pick_block

# Preferred key tokens per grid step (whole pages): the generated file defines its own under
# `# Tunables`.
KV_TOKENS_PER_BLOCK = 256
# piece: paged mask
# Masked logits: finite, so a row whose first rows are all masked never computes inf - inf.
PAGED_MASK_VALUE = -1e30
# At most this many page slots a step: each is a pipelined input of its own (a DMA, buffers, and
# an operand the compiler and TPU interpreter carry).
MAX_PAGE_SLOTS = 16
# end piece


def _pages_per_block(pages_per_seq, page_size):
    """Whole pages per grid step: KV_TOKENS_PER_BLOCK's worth, at most MAX_PAGE_SLOTS, dividing
    a sequence's pages."""
    preferred = min(max(1, KV_TOKENS_PER_BLOCK // page_size), MAX_PAGE_SLOTS)
    return _pick_block(pages_per_seq, preferred, 1)


def _page_of_slot(seq, block, slot, lengths_ref, table_ref, pages_per_block, page_size):
    """The page a block's slot reads: past the sequence's length, its last page (the block index
    repeats, so the pipeline does not fetch it again)."""
    needed = jax.lax.div(jnp.maximum(lengths_ref[seq], 1) - 1, page_size)
    return table_ref[seq, jnp.minimum(block * pages_per_block + slot, needed)]


def _head_and_token_mask(shape, block_start, length, group, kv_heads, rows_per_token, kv_offset):
    """Where a query head (row: head-major, `group` query heads per key head) meets its own key
    head's key (column: token-major, `rows_per_token` rows a token, key head h at row
    h * rows_per_token // kv_heads + kv_offset) of a token before `length`."""
    rows = jax.lax.broadcasted_iota(jnp.int32, shape, 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, shape, 1)
    per_head = rows_per_token // kv_heads
    within = jax.lax.rem(cols, rows_per_token)
    own_head = within == jax.lax.div(rows, group) * per_head + kv_offset
    tokens = block_start + jax.lax.div(cols, rows_per_token)
    return jnp.logical_and(own_head, tokens < length)


def _paged_decode_kernel(
    lengths_ref,
    table_ref,
    rows_ref,
    q_ref,
    *refs,
    pages_per_block,
    page_size,
    group,
    kv_heads,
    scale,
    kv_interleaved,
):
    """One sequence's query row against one block of its pages. refs: the K page slots, the V
    page slots (none when `kv_interleaved`), the output, then the max, sum and output scratch."""
    del rows_ref  # read by the query's index map only
    slots = refs[: pages_per_block if kv_interleaved else 2 * pages_per_block]
    o_ref, max_ref, sum_ref, acc_ref = refs[len(slots) :]
    seq, block = pl.program_id(0), pl.program_id(1)
    length = lengths_ref[seq]
    block_start = block * pages_per_block * page_size

    @pl.when(block == 0)
    def _start_sequence():
        _start_statistics(max_ref, sum_ref, acc_ref)

    @pl.when(block_start < length)
    def _attend():
        keys = jnp.concatenate([slot[...] for slot in slots[:pages_per_block]], axis=0)
        logits = jax.lax.dot_general(
            q_ref[...], keys, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )
        if scale is not None:
            logits = logits * scale
        rows_per_token = keys.shape[0] // (pages_per_block * page_size)
        mask = _head_and_token_mask(
            logits.shape, block_start, length, group, kv_heads, rows_per_token, 0
        )
        logits = jnp.where(mask, logits, PAGED_MASK_VALUE)
        if kv_interleaved:  # the value of key row r is row r + 1: values one row up
            values = jnp.roll(keys, -1, axis=0)
        else:
            values = jnp.concatenate([slot[...] for slot in slots[pages_per_block:]], axis=0)
        _online_softmax_step(logits, max_ref, sum_ref, acc_ref, values)

    @pl.when(block == pl.num_programs(1) - 1)
    def _finish_sequence():
        _finish_output(o_ref, acc_ref, sum_ref)


def _paged_attention(q, k_pages, v_pages, lengths, table, query_rows, *, out_dtype, scale=None):
    """Decode attention: sequence s's query q[query_rows[s]] (q: (tokens, q_heads, head_dim))
    over the first lengths[s] tokens of the pages table[s] names, token t in slot t % page_size
    of page table[s, t // page_size]. k_pages and v_pages: (pages, page_size, kv_heads,
    head_dim); v_pages None when k_pages interleaves them (head 2h K, 2h + 1 V of key head h).
    Returns (sequences, q_heads, head_dim) in `out_dtype`."""
    kv_interleaved = v_pages is None
    pages, page_size, cache_heads, head_dim = k_pages.shape
    kv_heads = cache_heads // 2 if kv_interleaved else cache_heads
    num_seqs, pages_per_seq = table.shape
    q_heads = q.shape[1]
    pages_per_block = _pages_per_block(pages_per_seq, page_size)
    # A page's (page_size, heads) rows in one: row-major, so a view, not a copy.
    caches = [
        c.reshape(pages, page_size * cache_heads, head_dim)
        for c in (k_pages, v_pages)
        if c is not None
    ]
    page_rows = page_size * cache_heads

    def query_block(seq, block, lengths_ref, table_ref, rows_ref):
        """The sequence's query row, all heads."""
        return rows_ref[seq], 0, 0

    def page_block(slot, seq, block, lengths_ref, table_ref, rows_ref):
        """The page in `slot` of this block of the sequence's pages."""
        page = _page_of_slot(seq, block, slot, lengths_ref, table_ref, pages_per_block, page_size)
        return page, 0, 0

    def output_block(seq, block, lengths_ref, table_ref, rows_ref):
        return seq, 0, 0

    slot_specs = [
        pl.BlockSpec((None, page_rows, head_dim), functools.partial(page_block, slot))
        for _ in caches
        for slot in range(pages_per_block)
    ]
    blocks = 2 * _block_bytes(q_heads, head_dim, q.dtype) + len(slot_specs) * _block_bytes(
        page_rows, head_dim, k_pages.dtype
    )
    rows = pages_per_block * page_rows
    footprint = 2 * blocks + (
        2 * _block_bytes(q_heads, 1, jnp.float32)
        + _block_bytes(q_heads, head_dim, jnp.float32)
        + len(caches) * _block_bytes(rows, head_dim, k_pages.dtype)  # the concatenated pages
        + 4 * _block_bytes(q_heads, rows, jnp.float32)  # logits, mask, weights
    )
    kernel = functools.partial(
        _paged_decode_kernel,
        pages_per_block=pages_per_block,
        page_size=page_size,
        group=q_heads // kv_heads,
        kv_heads=kv_heads,
        scale=scale,
        kv_interleaved=kv_interleaved,
    )
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=3,
        grid=(num_seqs, pages_per_seq // pages_per_block),
        in_specs=[pl.BlockSpec((None, q_heads, head_dim), query_block), *slot_specs],
        out_specs=pl.BlockSpec((None, q_heads, head_dim), output_block),
        scratch_shapes=[
            pltpu.VMEM((q_heads, 1), jnp.float32),
            pltpu.VMEM((q_heads, 1), jnp.float32),
            pltpu.VMEM((q_heads, head_dim), jnp.float32),
        ],
    )
    operands = [cache for cache in caches for _ in range(pages_per_block)]
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((num_seqs, q_heads, head_dim), out_dtype),
        grid_spec=grid_spec,
        compiler_params=_compiler_params(("parallel", "arbitrary"), footprint),
    )(lengths, table, query_rows, q, *operands)
