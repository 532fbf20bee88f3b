"""A search graph as JSON (for tools) and as Graphviz DOT (to look at: `dot -Tsvg`)."""

from __future__ import annotations

import json
from typing import Any

from maxkernel_tui.agents.search.config import stored_search
from maxkernel_tui.agents.search.graph import (
    ACCEPTED,
    MERGED,
    REJECTED,
    Node,
    SearchGraph,
)
from maxkernel_tui.visible import visible

_COLOURS: dict[str, str] = {ACCEPTED: "palegreen", REJECTED: "lightpink", MERGED: "lightgrey"}


def node_json(node: Node) -> dict[str, Any]:
    return node.data() | {
        "status": node.status,
        "strategy": node.strategy,
        "score": node.score,
        "version_id": node.version_id,
    }


def to_json(graph: SearchGraph) -> str:
    found = graph.store.best_kernel(graph.session_id)  # the store's one rule
    best = graph.holding(found.version.id) if found is not None and found.accepted else None
    stored = stored_search(graph.extra)
    document = {
        "session_id": graph.session_id,
        # which speedup over XLA the search ranks by (kernels/perf/vs_xla.py); each node's
        # score_also is the other
        "rank_by": stored.config.rank_by if stored else None,
        "score_kind": found.score_kind if found is not None else "",
        "best": best.ref if best else None,
        "best_rule": found.rule.name.lower() if best and found else None,
        "nodes": [node_json(n) for n in graph.in_order()],
    }
    # every character outside ASCII escaped: a strategy or plan a model wrote cannot carry a
    # live control character (C1, bidi overrides) to whoever prints the file
    return json.dumps(document, indent=2)


def label(node: Node) -> str:
    """`#17 ✓ 1.42× grow-row-blocks`: number, status mark, score, strategy."""
    marks: dict[str, str] = {ACCEPTED: "✓", REJECTED: "✗", MERGED: "≡"}
    mark = marks.get(node.status, "…")
    score = f" {node.score:.3g}×" if node.score is not None else ""
    return f"#{node.number} {mark}{score} {node.strategy}"


def to_dot(graph: SearchGraph) -> str:
    lines = [
        "digraph search {",
        "  rankdir=LR;",
        "  node [shape=box, style=filled, fontname=monospace];",
    ]
    for node in graph.in_order():
        colour = _COLOURS.get(node.status, "white")
        text = visible(label(node)).replace('"', "'").replace("\\", "\\\\")
        lines.append(f'  {node.ref} [label="{text}", fillcolor={colour}];')
        for parent in node.parents:
            lines.append(f"  {parent} -> {node.ref};")
        if node.merged_into:
            lines.append(f"  {node.ref} -> {node.merged_into} [style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"
