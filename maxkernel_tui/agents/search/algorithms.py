"""What to expand next. An algorithm plans one round at a time from the nodes of earlier rounds
only, and picks strategies from the library in a fixed order: planning is a pure function of the
stored graph, so a resumed search plans the same rounds and finds their nodes already there.
A strategy the agent has no move for on a parent's kernel (`MoveCheck`) is skipped before it
costs a node: the next one in the order takes its place, and `Moves.skipped` keeps why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.graph import ROOT, Node, SearchGraph
from maxkernel_tui.agents.search.headroom import no_headroom
from maxkernel_tui.agents.strategies import Strategy, for_bound


@dataclass(frozen=True)
class NodePlan:
    parents: tuple[str, ...]
    strategy: str  # a library strategy's name, "initial" or "crossover"
    plan: str  # what is stored and shown
    instruction: str  # what the implementer is asked (a crossover's includes both kernels)
    tags: dict[str, Any] = field(default_factory=dict)


class Algorithm(Protocol):
    moves: Moves
    strategies: list[Strategy]  # the library, in the algorithm's order
    ended: str  # why it planned nothing more, when it can say more than "nothing left"

    def plan_round(self, graph: SearchGraph, round_: int) -> list[NodePlan]:
        """The expansions of `round_` (1, 2, ...), from the nodes of the rounds before it."""
        ...


@runtime_checkable
class MoveCheck(Protocol):
    """An agent that knows, without being asked, which strategies it cannot apply (the built-in
    one changes declared block sizes only); a model is assumed to try any."""

    def no_move(self, strategy: str, kernel: str) -> str | None:
        """Why `strategy` changes nothing the agent can change in `kernel`; None when it can."""
        ...


@dataclass(frozen=True)
class Skipped:
    node: str  # the parent it was skipped on
    strategy: str
    reason: str


class Moves:
    """The strategies the agent has a move for on a node's kernel, and those skipped (once each)."""

    def __init__(self, check: MoveCheck | None = None) -> None:
        self.check = check
        self.skipped: dict[tuple[str, str], Skipped] = {}

    def usable(self, node: Node, strategies: list[Strategy]) -> list[Strategy]:
        """`strategies` in their order, without those the agent has no move for on `node`."""
        return [s for s in strategies if self.allows(node, s.name)]

    def allows(self, node: Node, strategy: str) -> bool:
        """The agent has a move for `strategy` (a library name, or "crossover") on `node`'s
        kernel; when it has none, the skip is kept."""
        if self.check is None or not node.source:
            return True
        reason = self.check.no_move(strategy, node.source)
        if reason is not None:
            self.skipped.setdefault((node.ref, strategy), Skipped(node.ref, strategy, reason))
        return reason is None


def mutation(parents: tuple[str, ...], strategy: Strategy, **tags: Any) -> NodePlan:
    text = f'Apply the strategy "{strategy.title}" to the current kernel. {strategy.instruction}'
    return NodePlan(parents, strategy.name, f"{strategy.title}: {strategy.instruction}", text, tags)


def path_strategies(graph: SearchGraph, node: Node, round_: int) -> set[str]:
    """The strategies applied on the way from the root to `node`, and to its children of rounds
    before `round_` (not later ones: a resumed search must plan `round_` as it was planned)."""
    used = {child.strategy for child in graph.children(node.ref) if child.round < round_}
    return used | {n.strategy for n in graph.first_parent_line(node.ref)}


def rotated(strategies: list[Strategy], offset: int) -> list[Strategy]:
    """The library from its `offset`-th strategy on, wrapping round."""
    k = offset % len(strategies)
    return strategies[k:] + strategies[:k]


def growable_or_root(graph: SearchGraph, nodes: list[Node], round_: int) -> list[Node]:
    """`nodes` that may grow, best first (scored ones by score, then the unscored accepted)."""
    ok = [n for n in nodes if graph.growable(n, round_)]
    ranked = graph.ranked(ok)
    return ranked + [n for n in ok if n not in ranked]


class Parallel:
    """`width` independent lines from the root; each round every line expands its own best
    accepted kernel with the next strategy of its share of the library."""

    def __init__(
        self, config: SearchConfig, strategies: list[Strategy], moves: Moves | None = None
    ) -> None:
        self.width, self.strategies = config.width, strategies
        self.moves = moves or Moves()
        self.ended = ""

    def plan_round(self, graph: SearchGraph, round_: int) -> list[NodePlan]:
        plans = []
        root = graph[ROOT]
        if root.pruned_round is not None and root.pruned_round < round_:
            return []
        for line in range(self.width):
            members = [
                n for n in graph.in_order() if n.tags.get("line") == line and n.round < round_
            ]
            if any(
                n.pruned_round is not None and n.pruned_round < round_ and n.round == 1
                for n in members
            ):
                continue  # the line was pruned at its start
            best = growable_or_root(graph, members, round_)
            parent = best[0] if best else root
            start = line + (round_ - 1) * self.width
            usable = self.moves.usable(parent, rotated(self.strategies, start))
            if usable:
                plans.append(mutation((parent.ref,), usable[0], line=line))
        return plans


class Beam:
    """Keep the `width` best accepted kernels; expand each with `branches` strategies not yet
    tried on its path, those that matter for what bounds its estimate first. A child that scores
    worse than its parent (beyond the tolerance) does not enter the beam: the regression gate.
    A kernel the model puts at the headroom floor of its roofline plus dispatch or above is not
    expanded; when no kernel of the beam has headroom, the search ends and says so."""

    def __init__(
        self, config: SearchConfig, strategies: list[Strategy], moves: Moves | None = None
    ) -> None:
        self.width, self.branches, self.tolerance = (
            config.width,
            config.branches,
            config.regression_tolerance,
        )
        self.strategies = strategies
        self.moves = moves or Moves()
        self.floor = config.headroom_floor
        self.beam: list[str] = [ROOT]
        self.ended = ""

    def plan_round(self, graph: SearchGraph, round_: int) -> list[NodePlan]:
        if round_ > 1:
            self._advance(graph, round_)
        plans, full = [], []
        for j, ref in enumerate(self.beam):
            node = graph[ref]
            if node.pruned_round is not None and node.pruned_round < round_:
                continue
            why = no_headroom(
                node.number, node.reachable_share, node.model_target, node.model_basis, self.floor
            )
            if why is not None:
                full.append(why)
                continue
            used = path_strategies(graph, node, round_)
            ordered = for_bound(self.strategies, node.bound)
            order = self.moves.usable(node, rotated(ordered, j * self.branches))
            fresh = [s for s in order if s.name not in used]
            # when the path has used them all, one tried on an ancestor may be tried again here;
            # one tried from this very node would be the same expansion again
            here = {c.strategy for c in graph.children(ref) if c.round < round_}
            chosen = (fresh or [s for s in order if s.name not in here])[: self.branches]
            plans += [mutation((ref,), s, beam=j) for s in chosen]
        if not plans and full:
            self.ended = "; ".join(full)
        return plans

    def _advance(self, graph: SearchGraph, round_: int) -> None:
        children = [n for n in graph.in_order() if n.round == round_ - 1]
        passing = [
            n for n in growable_or_root(graph, children, round_) if self._no_regression(graph, n)
        ]
        if passing:
            self.beam = [n.ref for n in passing[: self.width]]

    def _no_regression(self, graph: SearchGraph, child: Node) -> bool:
        parent = graph[child.parents[0]]
        if parent.score is None or child.score is None or parent.score_kind != child.score_kind:
            return True  # nothing comparable: the gate cannot say it regressed
        return child.score >= parent.score * (1.0 - self.tolerance)
