"""A grouped spec -> a kernel file: pieces/grouped.py's grouped matmul (and, for a routed MoE,
pieces/moe.py's routing around it), copied as written, called with the spec's parameters; the
preferred row, column and depth blocks are the file's tunables.
"""

from __future__ import annotations

import textwrap

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.grouped import GroupedMatmulSpec, GroupedSpec, RoutedMoeSpec
from maxkernel_tui.agents.builtin.primitives import dtype_source
from maxkernel_tui.agents.builtin.program import Program
from maxkernel_tui.agents.builtin.tunables import Tunables

KNOBS = ("block_rows", "block_cols", "block_depth")

_GROUPED_PLAN = (
    "Plan: rows in consecutive groups by the group sizes; group g times weight g, f32 "
    "accumulation. One work item per (group, row tile) a group touches: the items' groups and "
    "tiles are scalar-prefetched, the index maps fetch each item's weight block, a tile "
    "straddling a group boundary is visited once per group and each visit writes its group's "
    "rows only. Grid (column blocks, items, depth steps), depth innermost."
)
_MOE_PLAN = (
    "Plan: router logits and top-k in XLA (a small matmul); each token's k copies sorted by "
    "expert; the gate and up projections in one grouped-matmul kernel (two f32 accumulators, "
    "SiLU(gate) * up as its epilogue), the down projection in another; the expert outputs put "
    "back in token order and summed with the softmax of the selected logits in f32. Only the "
    "selected experts run on a token. " + _GROUPED_PLAN
)


def render_grouped(spec: GroupedSpec, program: Program, tunables: Tunables) -> str:
    moe = isinstance(spec, RoutedMoeSpec)
    pieces = (parts.GROUPED_MATMUL, parts.ROUTED_MOE) if moe else (parts.GROUPED_MATMUL,)
    sections = [
        _docstring(_MOE_PLAN if moe else _GROUPED_PLAN) + "\n" + parts.imports("functools"),
        _constants(tunables) + "\n" + parts.VMEM_CONSTANTS,
        *parts.functions_source(*pieces),
        _computation(spec, program),
    ]
    return "\n\n".join(section.rstrip("\n") + "\n" for section in sections)


def _docstring(plan: str) -> str:
    checked = " The agent checked its reading against the reference at check shapes."
    return parts.kernel_docstring("Grouped-matmul", plan + checked)


def _constants(tunables: Tunables) -> str:
    return (
        "\n".join(
            [
                "# Tunables: preferred row tile, column and depth blocks (shrunk to fit).",
                f"BLOCK_ROWS = {tunables.block_rows}",
                f"BLOCK_COLS = {tunables.block_cols}",
                f"BLOCK_DEPTH = {tunables.block_depth}",
            ]
        )
        + "\n"
    )


def _computation(spec: GroupedSpec, program: Program) -> str:
    """computation(): the reference's arguments into the piece's wrapper."""
    names = program.arg_names
    out_dtype = dtype_source(spec.out_dtype)
    if isinstance(spec, GroupedMatmulSpec):
        call = (
            f"_grouped_matmul({names[spec.lhs]}, ({names[spec.weights]},), "
            f"{names[spec.group_sizes]}, out_dtype={out_dtype})"
        )
    else:
        roles = (spec.tokens, spec.router, spec.gate, spec.up, spec.down)
        arguments = ", ".join(names[p] for p in roles)
        call = (
            f"_routed_moe({arguments}, {spec.top_k}, grouped_matmul=_grouped_matmul, "
            f"out_dtype={out_dtype})"
        )
    lines = textwrap.wrap(call, 88, break_long_words=False, break_on_hyphens=False)
    return f"def computation({', '.join(names)}):\n    return " + "\n        ".join(lines) + "\n"
