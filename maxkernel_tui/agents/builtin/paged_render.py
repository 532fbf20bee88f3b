"""A paged-attention spec -> a paged decode-attention kernel file: pieces/paged_attention.py's
kernel and wrapper, copied as written, called with the spec's inputs; the key tokens per grid
step are the file's tunable.
"""

from __future__ import annotations

import textwrap

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.paged import PagedSpec
from maxkernel_tui.agents.builtin.primitives import dtype_source
from maxkernel_tui.agents.builtin.tunables import Tunables


def render_paged_attention(spec: PagedSpec, tunables: Tunables) -> str:
    sections = [
        _docstring(spec) + "\n" + parts.imports("functools"),
        _constants(spec, tunables) + "\n" + parts.VMEM_CONSTANTS + "\n" + parts.PAGED_MASK,
        *parts.functions_source(
            parts.RAGGED_PAGED_ATTENTION if spec.ragged else parts.PAGED_ATTENTION
        ),
        _computation(spec),
    ]
    return "\n\n".join(section.rstrip("\n") + "\n" for section in sections)


def _docstring(spec: PagedSpec) -> str:
    caches = (
        "one cache holding keys and values interleaved (head 2h K, 2h + 1 V)"
        if spec.values is None
        else "key and value caches"
    )
    if spec.ragged:
        plan = (
            "Plan: ragged paged attention (mixed prefill and decode): each sequence's query rows, "
            f"causal from its cached tokens, over the pages its row of the page table names, from "
            f"{caches} laid out (pages, page_size, heads, head_dim). Work items pair an aligned "
            "block of query rows with a sequence whose rows it holds, listed in the wrapper from "
            "the query starts; the lengths, page table, starts and work items are prefetched "
            "scalars the index maps read, one pipelined input per page slot; pages past an "
            "item's length or causal limit are neither fetched nor computed. Online softmax per "
            "key head: running max and sum in f32 VMEM scratch. The agent checked this reading "
            "against the reference at check shapes."
        )
    else:
        plan = (
            "Plan: decode attention of each sequence's query row over the pages its row of the "
            f"page table names, from {caches} laid out (pages, page_size, heads, head_dim), "
            "masked to the sequence's length. The lengths, page table and query rows are "
            "prefetched scalars the index maps read: each grid step (sequence, block of pages) "
            "fetches the pages it needs, one pipelined input per page slot; pages past the "
            "length are neither fetched nor computed. Online softmax: running max and sum in "
            "f32 VMEM scratch. The agent checked this reading against the reference at check "
            "shapes."
        )
    return parts.kernel_docstring("Paged attention", plan)


def _constants(spec: PagedSpec, tunables: Tunables) -> str:
    lines = [
        "# Tunables: preferred key tokens per grid step (shrunk to whole pages dividing a "
        "sequence's pages).",
        f"KV_TOKENS_PER_BLOCK = {tunables.block_cols}",
    ]
    if spec.ragged:
        lines += [
            "# Tunables: preferred query rows per block (shrunk to a divisor of the rows).",
            f"BLOCK_Q = {tunables.block_rows}",
        ]
    if spec.scale is not None:
        words = "times 1/sqrt(head dimension)" if spec.scale_per_dim else "as written"
        lines += [f"# The reference's factor on the logits, {words}.", f"SCALE = {spec.scale!r}"]
    return "\n".join(lines) + "\n"


def _computation(spec: PagedSpec) -> str:
    """computation(): the reference's arguments into pieces/paged_attention.py's wrapper."""
    names = spec.arg_names
    query = names[spec.query]
    body = ""
    scale = "None"
    if spec.scale is not None and spec.scale_per_dim:
        body = f"    scale = SCALE * {query}.shape[-1] ** -0.5  # 1/sqrt(head dim)\n"
        scale = "scale"
    elif spec.scale is not None:
        scale = "SCALE"
    values = "None" if spec.values is None else names[spec.values]
    table = names[spec.table]
    arguments = [query, names[spec.keys], values, names[spec.lengths], table]
    if spec.ragged:
        live = f"jnp.full((1,), {table}.shape[0], jnp.int32)"
        assert spec.query_rows is not None  # a ragged spec always has its query starts
        arguments += [names[spec.query_rows], live if spec.live is None else names[spec.live]]
        call = "    return _ragged_paged_attention("
    else:
        rows = f"jnp.arange({table}.shape[0], dtype=jnp.int32)"  # row s is sequence s's
        if spec.query_rows is not None:
            rows = f"{names[spec.query_rows]}[: {table}.shape[0]]"
        arguments.append(rows)
        call = "    return _paged_attention("
    arguments += [f"out_dtype={dtype_source(spec.out_dtype)}", f"scale={scale}"]
    lines = textwrap.wrap(
        ", ".join(arguments), 100 - len(call), break_long_words=False, break_on_hyphens=False
    )
    return (
        f"def computation({', '.join(names)}):\n"
        + body
        + call
        + f"\n{' ' * len(call)}".join(lines)
        + ")\n"
    )
