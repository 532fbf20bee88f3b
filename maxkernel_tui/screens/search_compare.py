"""Two search nodes side by side: each one's figures (verdict, score and its kind, where the
verdict was earned, evaluations, tokens and dollars), and the diff from the first kernel to the
second. Never imports jax."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Log, Markdown

from maxkernel_tui.agents.orchestration.diffs import unified
from maxkernel_tui.agents.search.graph import Node
from maxkernel_tui.screens.search_evidence import evidence_facts
from maxkernel_tui.visible import visible


def figures(node: Node) -> str:
    """One node's figures, as Markdown."""
    score = node.score_words()
    lines = [
        f"### #{node.number} {node.status} · {node.strategy}",
        f"score: {score}",
        f"{node.evals} evaluations · {node.tokens:,} tokens · ${node.cost_usd:.4f}",
        *([f"*{node.detail}*"] if node.detail else []),
        *evidence_facts(node),
    ]
    return visible("\n\n".join(lines))


class CompareScreen(ModalScreen[None]):
    CSS_PATH = "search_compare.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, first: Node, second: Node) -> None:
        super().__init__()
        self.first, self.second = first, second

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-box"):
            with Horizontal(id="compare-figures"):
                yield Markdown(figures(self.first), id="compare-first")
                yield Markdown(figures(self.second), id="compare-second")
            yield Log(id="compare-diff")

    def on_mount(self) -> None:
        box = self.query_one("#compare-box")
        box.border_title = f"#{self.first.number} against #{self.second.number}"
        diff = unified(
            self.first.source,
            self.second.source,
            f"#{self.first.number}",
            f"#{self.second.number}",
        )
        self.query_one("#compare-diff", Log).write_lines(
            visible(diff).splitlines() or ["(the same kernel)"]
        )
