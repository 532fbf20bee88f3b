"""The live search screen: the tree of nodes (status, score and kind, strategy, parents), the best
score over time, the selected node's plan and its diff against its parent, and counters. What it
shows comes from its `SearchFeed` (services/search_feed.py). A search in this process is followed
by its events, batched as the workbench's are, each batch one `SearchMessage`; one in another
process sends none, so the screen reads it again every FOLLOW_S. A search run here is paused,
stopped and pruned through `control`; any search, here or in another process, is steered through
its feed (an idea or a strategy at a node, a node expanded next, pinned, a kernel written by
hand from it, the score's TPU generation, two nodes compared): each action is stored at once and
taken up at the search's next round, and the screen lists them. Every node has its evidence card
(c). Never imports jax, nor the store."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Log, Markdown, Sparkline, Static, Tree

from maxkernel_tui.agents.orchestration.diffs import unified
from maxkernel_tui.agents.search.export import label
from maxkernel_tui.agents.search.graph import ACCEPTED, Node, NodeSet
from maxkernel_tui.agents.search.steering import STEERING_SKIP, Steer
from maxkernel_tui.agents.strategies import applicable
from maxkernel_tui.kernels.perf.vs_xla import ranked_by
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.screens.evidence_card import EvidenceCardScreen, Portability
from maxkernel_tui.screens.hand_edit import HandEditScreen
from maxkernel_tui.screens.messages import KernelPromoted
from maxkernel_tui.screens.plain import plain
from maxkernel_tui.screens.search_compare import CompareScreen
from maxkernel_tui.screens.search_evidence import evidence_facts
from maxkernel_tui.services.search_feed import SearchFacts, SearchFeed, Skipped
from maxkernel_tui.store.kinds import SteerAction
from maxkernel_tui.visible import visible

if TYPE_CHECKING:
    from maxkernel_tui.agents.orchestration.events import SessionEvent

FOLLOW_S = 1.0  # how often a search in another process (no events reach us) is read again
# What the tree's marks and the bars under it mean.
LEGEND = (
    "✓ accepted · ✗ rejected · ≡ the same kernel as another node (merged into it) · "
    "✂ pruned (x) · ⚑ pinned (t) · … not judged yet · 1.42× its score · bars: the best score so far"
)
STEERING_SHOWN = 8  # the latest steering actions listed under the tree
# What the input line asks for, by the steering action it gives.
ASKS = {
    SteerAction.IDEA: "an idea for the implementer, from this node",
    SteerAction.STRATEGY: "a strategy from this node",
    SteerAction.TARGET: "the TPU generation to score on",
}


@dataclass
class SearchMessage(Message, bubble=False):
    """A batch of what the search did, in order (from its journal, through the feed)."""

    events: list[SessionEvent]
    ended: bool = False


class SearchControl(Protocol):
    """What the screen's keys ask of a search running in this process
    (agents.search.runner.Search)."""

    @property
    def paused(self) -> bool: ...

    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def stop(self) -> None: ...
    def prune(self, ref: str) -> Any: ...


def node_line(node: Node, pinned: bool = False) -> str:
    """`#17 ✓ 1.42× grow-row-blocks ← #9`."""
    parents = ", ".join(f"#{p.removeprefix('n')}" for p in node.parents)
    pruned = " ✂" if node.pruned_round is not None else ""
    pin = " ⚑" if pinned else ""
    return label(node) + (f" ← {parents}" if parents else "") + pruned + pin


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
        Binding("i", "steer('idea')", "Idea at node"),
        Binding("g", "steer('strategy')", "Strategy at node"),
        Binding("n", "expand", "Expand next"),
        Binding("t", "pin", "Pin/unpin"),
        Binding("T", "steer('target')", "Score's TPU"),
        Binding("o", "hand", "Child by hand"),
        Binding("m", "compare", "Compare two"),
        Binding("c", "card", "Evidence card"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(
        self,
        task: Task,
        feed: SearchFeed,
        *,
        control: SearchControl | None = None,
        portability: Portability | None = None,
    ) -> None:
        super().__init__()
        self.kernel_task, self.session_id = task, feed.session_id
        self._feed, self._control, self._portability = feed, control, portability
        self._asking: SteerAction | None = None  # what the open input line gives
        self._marked: str | None = None  # the first node of a comparison
        self._facts = SearchFacts(NodeSet([]), [], None, 0, 0.0, None, None)
        self._started = time.monotonic()
        self._shown: dict[str, tuple[Any, ...]] = {}
        self._tree_nodes: dict[str, Any] = {}
        self.batches = 0  # the search's batches of events handled (a live search's only route)

    def compose(self) -> ComposeResult:
        yield Static(id="counters", markup=False)
        with Horizontal(id="panes"):
            with Vertical(id="tree-pane", classes="pane"):
                yield Tree("search", id="nodes")
                yield Static(LEGEND, id="legend", markup=False)
                yield Static(id="steering", markup=False)
                yield Sparkline([], id="best")
            with Vertical(id="detail-pane", classes="pane"):
                yield Markdown("select a node", id="plan")
                yield Log(id="diff")
        yield Input(id="steer-input")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tree-pane").border_title = "Nodes"
        self.query_one("#detail-pane").border_title = "Plan and diff against the parent"
        tree = self.query_one("#nodes", Tree)
        tree.root.expand()
        tree.show_root = False
        tree.focus()
        self.query_one("#steer-input", Input).display = False
        if self._feed.live:
            self._redraw()
            self._feed.attach(self._deliver)
        else:
            self._follow()

    def _deliver(self, events: Sequence[SessionEvent], ended: bool) -> None:
        """A batch from the feed (on the event loop): to this screen as one message."""
        self.post_message(SearchMessage(list(events), ended))

    def on_search_message(self, message: SearchMessage) -> None:
        from maxkernel_tui.agents.orchestration.events import TextChunk

        self.batches += 1
        if message.ended or not all(isinstance(e, TextChunk) for e in message.events):
            self._redraw()  # streamed text alone changes nothing this screen shows

    def _follow(self) -> None:
        """A search in another process: read again, then once more in FOLLOW_S (a one-shot
        timer re-armed, never overlapping reads), until it has ended."""
        self._redraw()
        if self._facts.ended is None:
            self.set_timer(FOLLOW_S, self._follow)

    def on_unmount(self) -> None:
        self._feed.close()

    # -- drawing --------------------------------------------------------------------------------

    @property
    def _view(self) -> NodeSet:
        return self._facts.nodes

    @property
    def _skipped(self) -> list[Skipped]:
        """Strategies the agent had no move for (steering that grew nothing is listed apart)."""
        return [s for s in self._facts.skipped if not s.strategy.startswith(STEERING_SKIP)]

    def _redraw(self) -> None:
        self._facts = self._feed.read()
        self._draw_tree()
        series = best_over_time(self._view)
        best = self.query_one("#best", Sparkline)
        # a sparkline of one value is drawn as solid blocks: none until a node has a score, then
        # from 0 (no kernel yet), so that the bars show the best's growth
        best.display = bool(series)
        best.data = [0.0, *series]
        self._draw_counters()
        self._draw_steering()

    def _draw_steering(self) -> None:
        shown = self._facts.steering[-STEERING_SHOWN:]
        lines = [f"➤ {s.words()}" for s in shown]
        steering = self.query_one("#steering", Static)
        steering.display = bool(lines)
        steering.update(visible("\n".join(["steering:", *lines])))

    def _draw_tree(self) -> None:
        tree = self.query_one("#nodes", Tree)
        for node in self._view.in_order():
            pinned = node.ref in self._facts.pinned
            shown = (node.status, node.score, node.pruned_round, tuple(node.parents), pinned)
            if self._shown.get(node.ref) == shown:
                continue
            self._shown[node.ref] = shown
            item = self._tree_nodes.get(node.ref)
            if item is None:
                parent = self._tree_nodes.get(node.parents[0]) if node.parents else None
                line = plain(node_line(node, pinned))
                item = (parent or tree.root).add(line, data=node.ref, expand=True)
                if parent is not None:
                    parent.allow_expand = True
                self._tree_nodes[node.ref] = item
            else:
                item.set_label(plain(node_line(node, pinned)))
        if (tree.cursor_node is None or tree.cursor_node.data is None) and self._tree_nodes:
            tree.move_cursor(self._tree_nodes[self._view.in_order()[0].ref])  # the keys need one
        if tree.cursor_node is not None and tree.cursor_node.data is not None:
            self._show_detail(tree.cursor_node.data)

    def _draw_counters(self) -> None:
        nodes = self._view.in_order()
        evals = sum(n.evals for n in nodes)
        cap = f"/{self._facts.max_evals}" if self._facts.max_evals else ""
        tokens, cost = self._facts.tokens, self._facts.cost_usd
        minutes = max((time.monotonic() - self._started) / 60.0, 1 / 60)
        best_text = self._best_text()
        rank_by = self._facts.rank_by
        ranked = f" ─ {ranked_by(rank_by)}" if rank_by else ""
        skipped = len(self._skipped)
        state = self._state() + (
            f" ─ {skipped} strategies skipped: nothing for them to change" if skipped else ""
        )
        self.query_one("#counters", Static).update(
            visible(
                f" search ─ {self.kernel_task.task_id}{state} ─ {len(nodes)} nodes ─ "
                f"evaluations {evals}{cap} "
                f"({evals / minutes:.1f}/min) ─ {tokens:,} tok ${cost:.2f} ─ best {best_text}"
                f"{ranked}"
            )
        )

    def _best_text(self) -> str:
        """The search's best kernel as every screen and command names it (the store's one rule):
        its node, its version and the rule that picked it."""
        found = self._facts.best
        if found is None:
            return "none yet"
        node = self._view.holding(found.version.id)
        kernel = f"kernel {found.words()}"
        return kernel if node is None else f"{node_line(node)}: {kernel}"

    def _state(self) -> str:
        """` ─ done: <why it ended>` from the moment the search ends (here or in another
        process), else running or paused."""
        if self._facts.ended is not None:
            return f" ─ done: {self._facts.ended}"
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
            f"score: {node.score_words()}" if node.score is not None else "score: none",
            f"{node.evals} evaluations · {node.tokens:,} tokens · ${node.cost_usd:.4f}"
            + (f" · evaluated on {node.executor_node}" if node.executor_node else ""),
        ]
        if node.detail:
            facts.append(f"*{node.detail}*")
        facts += evidence_facts(node)
        facts += [
            f"steering not taken: {s.reason}"
            for s in self._facts.skipped
            if s.node == node.ref and s.strategy.startswith(STEERING_SKIP)
        ]
        skipped = [f"{s.strategy} ({s.reason})" for s in self._skipped if s.node == node.ref]
        if skipped:
            facts.append(
                "strategies skipped here, the agent found nothing for them to change: "
                + "; ".join(skipped)
            )
        self.query_one("#plan", Markdown).update(visible("\n\n".join(facts + [node.plan])))
        log = self.query_one("#diff", Log)
        log.clear()
        if node.source:
            base = parent.source if parent is not None else ""
            log.write_lines(
                visible(
                    unified(
                        base,
                        node.source,
                        f"#{parent.number}" if parent else "nothing",
                        f"#{node.number}",
                    )
                ).splitlines()
                or ["(same kernel as its parent)"]
            )

    # -- keys ---------------------------------------------------------------------------------

    def _selected(self) -> Node | None:
        cursor = self.query_one("#nodes", Tree).cursor_node
        if cursor is None or cursor.data is None:
            self.notify("no node yet: the search has not made one", severity="warning")
            return None
        return self._view.nodes.get(cursor.data)

    def action_pause(self) -> None:
        if self._control is None:
            self.notify(
                "this search runs in another process: nothing to pause here", severity="warning"
            )
            return
        (self._control.resume if self._control.paused else self._control.pause)()
        self._redraw()

    def action_stop(self) -> None:
        if self._control is not None:
            self._control.stop()
            self.notify("search stopped: running nodes are rerun on resume")
            self._redraw()

    def action_prune(self) -> None:
        node = self._selected()
        if node is None or self._control is None:
            return
        pruned = self._control.prune(node.ref)
        self.notify(f"pruned #{node.number} and {max(len(pruned) - 1, 0)} below it")
        self._redraw()

    def action_promote(self) -> None:
        node = self._selected()
        if node is None:
            return
        if node.status != ACCEPTED:
            self.notify(
                "promote an accepted node: its kernel becomes the workbench's source",
                severity="warning",
            )
            return
        self.post_message(
            KernelPromoted(
                self.kernel_task, node.source, f"search node #{node.number}", self.session_id
            )
        )

    # -- steering: stored through the feed, taken up by the search at its next round ------------

    def _give(self, steer: Steer) -> None:
        try:
            given = self._feed.steer(steer)
        except ValueError as error:
            self.notify(str(error), severity="warning")
            return
        then = (
            f"the search has ended: `maxkernel-tui search --resume {self.session_id}` takes it up"
            if self._facts.ended is not None
            else "taken up at the search's next round"
        )
        self.notify(f"steering: {given.words()} ({then})")
        self._redraw()

    def action_steer(self, action: str) -> None:
        """Open the input line for an idea, a strategy or the score's TPU generation."""
        chosen = SteerAction(action)
        if chosen != SteerAction.TARGET and self._selected() is None:
            return
        field = self.query_one("#steer-input", Input)
        hint = {
            SteerAction.STRATEGY: ", ".join(s.name for s in self._strategies()),
            SteerAction.TARGET: ", ".join(TARGETS),
        }.get(chosen, "")
        field.placeholder = ASKS[chosen] + (f" ({hint})" if hint else "")
        field.value, field.display, self._asking = "", True, chosen
        field.focus()

    def _strategies(self) -> list[Any]:
        return applicable(self.kernel_task.category)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        asked, self._asking = self._asking, None
        self._close_input()
        text, node = event.value.strip(), self._selected()
        if not text or asked is None:
            return
        if asked == SteerAction.TARGET:
            if text not in TARGETS:
                self.notify(f"not a TPU generation: {text}", severity="warning")
                return
            self._give(Steer(SteerAction.TARGET, target=text))
        elif node is not None and asked == SteerAction.IDEA:
            self._give(Steer(SteerAction.IDEA, node=node.ref, text=text))
        elif node is not None and asked == SteerAction.STRATEGY:
            if text not in {s.name for s in self._strategies()}:
                self.notify(f"no strategy {text!r} for this task", severity="warning")
                return
            self._give(Steer(SteerAction.STRATEGY, node=node.ref, strategy=text))

    def _close_input(self) -> None:
        self.query_one("#steer-input", Input).display = False
        self.query_one("#nodes", Tree).focus()

    def action_back(self) -> None:
        if self.query_one("#steer-input", Input).display:
            self._asking = None
            self._close_input()
            return
        self.app.pop_screen()

    def action_expand(self) -> None:
        node = self._selected()
        if node is not None:
            self._give(Steer(SteerAction.EXPAND, node=node.ref))

    def action_pin(self) -> None:
        node = self._selected()
        if node is not None:
            pinned = node.ref in self._facts.pinned
            self._give(Steer(SteerAction.UNPIN if pinned else SteerAction.PIN, node=node.ref))

    def action_hand(self) -> None:
        """The node's kernel in an editor; what is saved there becomes the node's child."""
        node = self._selected()
        if node is None:
            return
        ref = node.ref

        def saved(source: str | None) -> None:
            if source is not None:
                self._give(Steer(SteerAction.HAND_CHILD, node=ref, source=source))

        title = f"a child of #{node.number} by hand (its kernel: {node.status})"
        self.app.push_screen(HandEditScreen(title, node.source), saved)

    def action_compare(self) -> None:
        """The first press marks the node; the second compares the marked one with this one."""
        node = self._selected()
        if node is None:
            return
        if self._marked is None or self._marked == node.ref:
            self._marked = node.ref
            self.notify(f"#{node.number} marked: m on another node compares them")
            return
        first = self._view.nodes[self._marked]
        self._marked = None
        self._feed.steer(Steer(SteerAction.COMPARE, node=first.ref, other=node.ref))
        self._redraw()
        self.app.push_screen(CompareScreen(first, node))

    def action_card(self) -> None:
        node = self._selected()
        if node is not None:
            card = self._feed.card(node)
            self.app.push_screen(EvidenceCardScreen(card, node.source, self._portability))
