"""The ragged paged-attention kernel the built-in agent writes (mixed prefill and decode in one
step, as vLLM serves): sequence s owns the query rows starts[s] .. starts[s + 1] - 1 and
lengths[s] cached tokens in the pages its row of the page table names; query r of a sequence
sees keys up to lengths[s] - q_len + r (causal, offset by what is already cached).

Query rows are cut in aligned blocks of BLOCK_Q; a work item is one query block paired with one
sequence whose rows it holds (a block holds several short sequences, a long sequence spans
several blocks). The wrapper lists the items with jnp from the starts (at most one per block
plus one per sequence) and the kernel reads them as prefetched scalars: grid (work item, block
of pages), both 'arbitrary', so the items of one query block are consecutive and its output
block stays in VMEM until the last of them. The pages come as in paged_attention.py, one
pipelined input per page slot, clamped to the last page the item needs (past the sequence's
length or its last query's causal limit nothing is fetched or computed).

Each key head is taken from the pages' rows in the kernel (keys and values interleaved, head
2h K and 2h + 1 V, or two caches), its query heads flattened to (rows * group, head_dim), with
f32 running max, sum and output per key head in VMEM scratch. Nothing views a Ref through a
reshape or bitcast (jax's TPU interpreter cannot run those transforms): values are sliced after
loading, so the kernel runs in interpret mode as compiled. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import _block_bytes, _compiler_params, _pick_block
from maxkernel_tui.agents.builtin.pieces.paged_attention import PAGED_MASK_VALUE, _pages_per_block

# Preferred query rows per block: the generated file defines its own under `# Tunables` (and
# KV_TOKENS_PER_BLOCK, which paged_attention._pages_per_block reads).
BLOCK_Q = 64


def _work_items(starts, num_seqs, tokens, block_q, max_items):
    """(query block, sequence, first item of its block, computes) of every work item, padded
    to `max_items` with copies of the last item that do nothing. A block no live sequence
    touches still gets one item, which only zeroes its output."""
    blocks = tokens // block_q
    live_starts = jnp.where(jnp.arange(starts.shape[0] - 1) < num_seqs, starts[1:], tokens)
    first_row = jnp.arange(blocks) * block_q
    first = jnp.searchsorted(live_starts, first_row, side="right")
    last = jnp.searchsorted(live_starts, first_row + block_q - 1, side="right")
    touched = jnp.minimum(last, num_seqs - 1) - first + 1
    counts = jnp.maximum(touched, 1)
    ends = jnp.cumsum(counts)
    items = jnp.arange(max_items)
    block = jnp.minimum(jnp.searchsorted(ends, items, side="right"), blocks - 1)
    rank = items - (ends[block] - counts[block])
    seq = jnp.minimum(first[block] + rank, starts.shape[0] - 2)
    real = items < ends[-1]
    computes = real & (touched[block] > 0)
    first_item = real & (rank == 0)
    return (
        block.astype(jnp.int32),
        seq.astype(jnp.int32),
        first_item.astype(jnp.int32),
        computes.astype(jnp.int32),
    )


def _item_last_page(item, lengths_ref, starts_ref, blocks_ref, seqs_ref, block_q, page_size):
    """The last page an item needs: its sequence's length, or its last query's causal limit."""
    seq = seqs_ref[item]
    length = lengths_ref[seq]
    q_len = starts_ref[seq + 1] - starts_ref[seq]
    last_row = jnp.minimum(blocks_ref[item] * block_q + block_q, starts_ref[seq + 1]) - 1
    limit = jnp.minimum(length, length - q_len + last_row - starts_ref[seq] + 1)
    return jax.lax.div(jnp.maximum(limit, 1) - 1, page_size), limit


def _ragged_kernel(
    lengths_ref,
    table_ref,
    starts_ref,
    blocks_ref,
    seqs_ref,
    firsts_ref,
    computes_ref,
    q_ref,
    *refs,
    pages_per_block,
    page_size,
    kv_heads,
    group,
    kv_interleaved,
    scale,
    block_q,
):
    """One work item's query block against one block of its sequence's pages. refs: the page
    slots (K then V unless interleaved), the output, then the max, sum, output accumulators
    (per key head) and the f32 output block."""
    slots = refs[: pages_per_block if kv_interleaved else 2 * pages_per_block]
    o_ref, max_ref, sum_ref, acc_ref, out_ref = refs[len(slots) :]
    item, block = pl.program_id(0), pl.program_id(1)
    seq = seqs_ref[item]
    start, length = starts_ref[seq], lengths_ref[seq]
    q_len = starts_ref[seq + 1] - start
    _, limit = _item_last_page(
        item, lengths_ref, starts_ref, blocks_ref, seqs_ref, block_q, page_size
    )
    block_start = block * pages_per_block * page_size
    computes = computes_ref[item] == 1

    @pl.when(jnp.logical_and(block == 0, firsts_ref[item] == 1))
    def _start_query_block():
        out_ref[...] = jnp.zeros_like(out_ref)

    @pl.when(jnp.logical_and(block == 0, computes))
    def _start_item():
        max_ref[...] = jnp.full_like(max_ref, -jnp.inf)
        sum_ref[...] = jnp.zeros_like(sum_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(jnp.logical_and(computes, block_start < limit))
    def _attend():
        pages = jnp.concatenate([slot[...] for slot in slots[:pages_per_block]], axis=0)
        pages = pages.astype(jnp.float32)  # whole (8, 128) tiles: heads are sliced in f32
        value_pages = pages
        if not kv_interleaved:
            value_pages = jnp.concatenate(
                [slot[...] for slot in slots[pages_per_block:]], axis=0
            ).astype(jnp.float32)
        queries = q_ref[...].astype(jnp.float32)  # (block_q, q_heads, head_dim)
        rows = block_q * group
        shape = (rows, pages.shape[0])
        row_token = blocks_ref[item] * block_q + jax.lax.div(
            jax.lax.broadcasted_iota(jnp.int32, shape, 0), group
        )
        key = block_start + jax.lax.broadcasted_iota(jnp.int32, shape, 1)
        visible = jnp.logical_and(key < length, key <= length - q_len + row_token - start)
        for head in range(kv_heads):
            k_row, v_row = (2 * head, 2 * head + 1) if kv_interleaved else (head, head)
            keys = pages[:, k_row, :].astype(q_ref.dtype)
            values = value_pages[:, v_row, :].astype(q_ref.dtype)
            q = queries[:, head * group : (head + 1) * group, :].reshape(rows, -1)
            logits = jax.lax.dot_general(
                q.astype(q_ref.dtype),
                keys,
                (((1,), (1,)), ((), ())),
                preferred_element_type=jnp.float32,
            )
            if scale is not None:
                logits = logits * scale
            logits = jnp.where(visible, logits, PAGED_MASK_VALUE)
            previous = max_ref[head]
            current = jnp.maximum(previous, jnp.max(logits, axis=1, keepdims=True))
            rescale = jnp.exp(previous - current)
            weights = jnp.exp(logits - current)
            sum_ref[head] = rescale * sum_ref[head] + jnp.sum(weights, axis=1, keepdims=True)
            acc_ref[head] = rescale * acc_ref[head] + jnp.dot(
                weights.astype(values.dtype), values, preferred_element_type=jnp.float32
            )
            max_ref[head] = current

    @pl.when(jnp.logical_and(computes, block == pl.num_programs(1) - 1))
    def _finish_item():
        tokens = blocks_ref[item] * block_q + jax.lax.broadcasted_iota(jnp.int32, out_ref.shape, 0)
        mine = jnp.logical_and(tokens >= start, tokens < start + q_len)
        heads = [
            (acc_ref[head] / sum_ref[head]).reshape(block_q, group, -1) for head in range(kv_heads)
        ]
        out_ref[...] = jnp.where(mine, jnp.concatenate(heads, axis=1), out_ref[...])

    @pl.when(block == pl.num_programs(1) - 1)
    def _write_output():  # written back once the next item moves to another query block
        o_ref[...] = out_ref[...].astype(o_ref.dtype)


def _ragged_paged_attention(
    q, k_pages, v_pages, lengths, table, starts, num_seqs, *, out_dtype, scale=None
):
    """q (tokens, q_heads, head_dim); k_pages and v_pages (pages, page_size, kv_heads,
    head_dim), v_pages None when k_pages interleaves them (head 2h K, 2h + 1 V); lengths and
    table per sequence slot, starts one longer, num_seqs a (1,) array of the live slots.
    Returns (tokens, q_heads, head_dim) in `out_dtype`, rows of no live sequence zero."""
    kv_interleaved = v_pages is None
    tokens, q_heads, head_dim = q.shape
    _, page_size, cache_heads, _ = k_pages.shape
    kv_heads = cache_heads // 2 if kv_interleaved else cache_heads
    slots, pages_per_seq = table.shape
    block_q = _pick_block(tokens, BLOCK_Q, 8)
    pages_per_block = _pages_per_block(pages_per_seq, page_size)
    max_items = tokens // block_q + slots
    work = _work_items(starts, num_seqs[0], tokens, block_q, max_items)
    caches = [c for c in (k_pages, v_pages) if c is not None]

    def query_block(item, block, lengths_ref, table_ref, starts_ref, blocks_ref, *_):
        return blocks_ref[item], 0, 0

    def page_block(slot, item, block, lengths_ref, table_ref, starts_ref, blocks_ref, seqs_ref, *_):
        last, _ = _item_last_page(
            item, lengths_ref, starts_ref, blocks_ref, seqs_ref, block_q, page_size
        )
        page = table_ref[seqs_ref[item], jnp.minimum(block * pages_per_block + slot, last)]
        return page, 0, 0, 0

    page_spec = (None, page_size, cache_heads, head_dim)
    slot_specs = [
        pl.BlockSpec(page_spec, functools.partial(page_block, slot))
        for _ in caches
        for slot in range(pages_per_block)
    ]
    rows = block_q * q_heads // kv_heads
    keys = pages_per_block * page_size
    blocks = 2 * _block_bytes(block_q * q_heads, head_dim, q.dtype) + len(slot_specs) * (
        _block_bytes(page_size * cache_heads, head_dim, k_pages.dtype)
    )
    footprint = 2 * blocks + (
        kv_heads
        * (2 * _block_bytes(rows, 1, jnp.float32) + _block_bytes(rows, head_dim, jnp.float32))
        + 2 * _block_bytes(block_q * q_heads, head_dim, jnp.float32)
        + len(caches) * _block_bytes(keys * cache_heads, head_dim, jnp.float32)
        + 4 * _block_bytes(rows, keys, jnp.float32)
    )
    kernel = functools.partial(
        _ragged_kernel,
        pages_per_block=pages_per_block,
        page_size=page_size,
        kv_heads=kv_heads,
        group=q_heads // kv_heads,
        kv_interleaved=kv_interleaved,
        scale=scale,
        block_q=block_q,
    )
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=7,
        grid=(max_items, pages_per_seq // pages_per_block),
        in_specs=[pl.BlockSpec((block_q, q_heads, head_dim), query_block), *slot_specs],
        out_specs=pl.BlockSpec((block_q, q_heads, head_dim), query_block),
        scratch_shapes=[
            pltpu.VMEM((kv_heads, rows, 1), jnp.float32),
            pltpu.VMEM((kv_heads, rows, 1), jnp.float32),
            pltpu.VMEM((kv_heads, rows, head_dim), jnp.float32),
            pltpu.VMEM((block_q, q_heads, head_dim), jnp.float32),
        ],
    )
    operands = [cache for cache in caches for _ in range(pages_per_block)]
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((tokens, q_heads, head_dim), out_dtype),
        grid_spec=grid_spec,
        compiler_params=_compiler_params(("arbitrary", "arbitrary"), footprint),
    )(lengths, table, starts, *work, q, *operands)
