"""The live search screen: the tree of nodes (status, score and kind, strategy, parents), the best
score over time, the selected node's plan and its diff against its parent, and counters. It reads
the graph from the store, so it follows a search in this process or in another one; a search run
here is steered through `control` (pause, stop, prune). Redrawn at most every TICK_S, and only
when something changed: events only mark the view stale. Never imports jax."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar, Protocol

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Log, Markdown, Sparkline, Static, Tree

from maxkernel_tui.agents.orchestration.diffs import unified
from maxkernel_tui.agents.orchestration.ending import best_at_end
from maxkernel_tui.agents.search.export import label
from maxkernel_tui.agents.search.graph import ACCEPTED, Node, NodeSet, load_nodes
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.screens.messages import KernelPromoted
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.rows import SessionStatus

TICK_S = 0.25  # the view's frame: a few redraws a second at most
ACTIVE = SessionStatus.ACTIVE
FOLLOW_S = (
    1.0  # how often the store is read when no event says it changed (a search in another process)
)


class SearchControl(Protocol):
    """What the screen's keys ask of a search running in this process
    (agents.search.runner.Search)."""

    @property
    def paused(self) -> bool: ...

    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def stop(self) -> None: ...
    def prune(self, ref: str) -> Any: ...


def node_line(node: Node) -> str:
    """`#17 ✓ 1.42× grow-row-blocks ← #9`."""
    parents = ", ".join(f"#{p.removeprefix('n')}" for p in node.parents)
    pruned = " ✂" if node.pruned_round is not None else ""
    return label(node) + (f" ← {parents}" if parents else "") + pruned


def best_over_time(nodes: NodeSet) -> list[float]:
    """The best score of the search's kind after each judged node, in the order they finished."""
    kind = nodes.score_kind()
    judged = sorted(
        (
            n
            for n in nodes.in_order()
            if n.status == ACCEPTED and n.score is not None and n.score_kind == kind
        ),
        key=lambda n: n.updated,
    )
    best, series = float("-inf"), []
    for node in judged:
        best = max(best, node.score or 0.0)
        series.append(best)
    return series


class SearchScreen(Screen[None]):
    CSS_PATH = "search.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "space", "pause", "Pause/resume", priority=True
        ),  # the tree would fold a node with it
        Binding("s", "stop", "Stop"),
        Binding("p", "promote", "Promote to workbench"),
        Binding("x", "prune", "Prune branch"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(
        self,
        task: Task,
        store_path: Path,
        session_id: str,
        *,
        control: SearchControl | None = None,
        max_evals: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_task, self.session_id = task, session_id
        self._store = Store(
            store_path
        )  # a reader of its own: the search writes through the shared one
        self._control, self._max_evals = control, max_evals
        self._sources: dict[int, str] = {}
        self._view = NodeSet([])
        self._stale, self._read_at, self._started = True, 0.0, time.monotonic()
        self._shown: dict[str, tuple[Any, ...]] = {}
        self._tree_nodes: dict[str, Any] = {}
        self._skipped: list[tuple[str, ...]] = []  # (node, strategy, why): no move for it there
        self._ended: str | None = None  # why the search ended, once it has

    def compose(self) -> ComposeResult:
        yield Static(id="counters", markup=False)
        with Horizontal(id="panes"):
            with Vertical(id="tree-pane", classes="pane"):
                yield Tree("search", id="nodes")
                yield Sparkline([], id="best")
            with Vertical(id="detail-pane", classes="pane"):
                yield Markdown("select a node", id="plan")
                yield Log(id="diff")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tree-pane").border_title = "Nodes"
        self.query_one("#detail-pane").border_title = "Plan and diff against the parent"
        tree = self.query_one("#nodes", Tree)
        tree.root.expand()
        tree.show_root = False
        tree.focus()
        self.set_interval(TICK_S, self._tick)
        self._tick()

    def mark_stale(self, *_: Any) -> None:
        """Something changed: the next tick reads the store. Safe from any thread (a journal
        listener)."""
        self._stale = True

    def on_unmount(self) -> None:
        self._store.close()

    # -- drawing --------------------------------------------------------------------------------

    def _tick(self) -> None:
        if not self._stale and time.monotonic() - self._read_at < FOLLOW_S:
            return
        self._stale, self._read_at = False, time.monotonic()
        self._view = NodeSet(load_nodes(self._store, self.session_id, self._sources))
        if self._view.nodes:  # the search's settings and the strategies it skipped
            extra = self._store.search_node(self._view.in_order()[0].row_id).data.get("extra", {})
            if self._max_evals is None:  # a search in another process: its stored cap
                self._max_evals = extra.get("config", {}).get("max_evals")
            self._skipped = [tuple(entry) for entry in extra.get("skipped", [])]
        self._draw_tree()
        # from 0 (no kernel yet), so that bars show the best's growth, not solid blocks
        self.query_one("#best", Sparkline).data = [0.0, *best_over_time(self._view)]
        self._draw_counters()

    def _draw_tree(self) -> None:
        tree = self.query_one("#nodes", Tree)
        for node in self._view.in_order():
            shown = (node.status, node.score, node.pruned_round, tuple(node.parents))
            if self._shown.get(node.ref) == shown:
                continue
            self._shown[node.ref] = shown
            item = self._tree_nodes.get(node.ref)
            if item is None:
                parent = self._tree_nodes.get(node.parents[0]) if node.parents else None
                item = (parent or tree.root).add(node_line(node), data=node.ref, expand=True)
                if parent is not None:
                    parent.allow_expand = True
                self._tree_nodes[node.ref] = item
            else:
                item.set_label(node_line(node))
        if tree.cursor_node is not None and tree.cursor_node.data is not None:
            self._show_detail(tree.cursor_node.data)

    def _draw_counters(self) -> None:
        nodes = self._view.in_order()
        evals = sum(n.evals for n in nodes)
        cap = f"/{self._max_evals}" if self._max_evals else ""
        tokens, cost = self._store.usage(self.session_id)
        minutes = max((time.monotonic() - self._started) / 60.0, 1 / 60)
        best = self._view.best()
        best_text = "none yet" if best is None else node_line(best)
        skipped = len(self._skipped)
        state = self._state() + (f" ─ {skipped} strategies skipped (no move)" if skipped else "")
        self.query_one("#counters", Static).update(
            f" search ─ {self.kernel_task.task_id}{state} ─ {len(nodes)} nodes ─ "
            f"evaluations {evals}{cap} "
            f"({evals / minutes:.1f}/min) ─ {tokens:,} tok ${cost:.2f} ─ best {best_text} "
            f"({self._view.score_kind() or 'no score yet'})"
        )

    def _state(self) -> str:
        """` ─ done: <why it ended>` from the moment the search ends (here or in another
        process), else running or paused."""
        if self._ended is None and self._store.session(self.session_id).status != ACTIVE:
            found = best_at_end(self._store, self.session_id)
            self._ended = found.reason if found is not None else "ended"
        if self._ended is not None:
            return f" ─ done: {self._ended}"
        if self._control is None:
            return ""
        return " ─ PAUSED" if self._control.paused else " ─ running"

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        if event.node.data is not None:
            self._show_detail(event.node.data)

    def _show_detail(self, ref: str) -> None:
        node = self._view.nodes.get(ref)
        if node is None:
            return
        parent = self._view.nodes.get(node.parents[0]) if node.parents else None
        facts = [
            f"**#{node.number}** {node.status} · {node.strategy} · round {node.round}",
            f"score: {node.score:.3g} ({node.score_kind})"
            if node.score is not None
            else "score: none",
            f"{node.evals} evaluations · {node.tokens:,} tokens · ${node.cost_usd:.4f}"
            + (f" · evaluated on {node.executor_node}" if node.executor_node else ""),
        ]
        if node.detail:
            facts.append(f"*{node.detail}*")
        skipped = [f"{strategy} ({why})" for ref, strategy, why in self._skipped if ref == node.ref]
        if skipped:
            facts.append("skipped here, no move: " + "; ".join(skipped))
        self.query_one("#plan", Markdown).update("\n\n".join(facts + [node.plan]))
        log = self.query_one("#diff", Log)
        log.clear()
        if node.source:
            base = parent.source if parent is not None else ""
            log.write_lines(
                unified(
                    base,
                    node.source,
                    f"#{parent.number}" if parent else "nothing",
                    f"#{node.number}",
                ).splitlines()
                or ["(same kernel as its parent)"]
            )

    # -- keys ---------------------------------------------------------------------------------

    def _selected(self) -> Node | None:
        cursor = self.query_one("#nodes", Tree).cursor_node
        return None if cursor is None or cursor.data is None else self._view.nodes.get(cursor.data)

    def action_pause(self) -> None:
        if self._control is None:
            self.notify(
                "this search runs in another process: nothing to pause here", severity="warning"
            )
            return
        (self._control.resume if self._control.paused else self._control.pause)()
        self.mark_stale()

    def action_stop(self) -> None:
        if self._control is not None:
            self._control.stop()
            self.notify("search stopped: running nodes are rerun on resume")
            self.mark_stale()

    def action_prune(self) -> None:
        node = self._selected()
        if node is None or self._control is None:
            return
        pruned = self._control.prune(node.ref)
        self.notify(f"pruned #{node.number} and {max(len(pruned) - 1, 0)} below it")
        self.mark_stale()

    def action_promote(self) -> None:
        node = self._selected()
        if node is None or node.status != ACCEPTED:
            self.notify(
                "promote an accepted node: its kernel becomes the workbench's source",
                severity="warning",
            )
            return
        self.post_message(
            KernelPromoted(self.kernel_task, node.source, f"search node #{node.number}")
        )
