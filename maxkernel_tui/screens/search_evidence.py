"""The selected search node's verdict evidence, as the search screen's detail pane shows it: the
same lines `eval`, the workbench and the CLI's `search` print (agents/search/describe.py). Never
imports jax or Textual: it renders Markdown text."""

from __future__ import annotations

from maxkernel_tui.agents.search.describe import verdict_evidence
from maxkernel_tui.agents.search.graph import Node


def evidence_facts(node: Node) -> list[str]:
    """One Markdown paragraph of the node's verdict evidence, or none for a node not judged."""
    lines = verdict_evidence(node.scope, node.evidence)
    if not lines:
        return []
    # a line each (Markdown's hard break), without the Markdown reading "*" or "_" inside them
    return ["  \n".join(_escaped(line) for line in lines)]


def _escaped(text: str) -> str:
    return "".join(f"\\{c}" if c in "\\`*_[]<>#|" else c for c in text)
