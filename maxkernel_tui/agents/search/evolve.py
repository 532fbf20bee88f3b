"""Evolutionary search: a population split into islands that evolve apart (so one good kernel
does not take over everything at once) and trade their best every few generations. Parents are
chosen by fitness and novelty; every other child is a crossover of two parents, written by the
implementer from both kernels' sources."""

from __future__ import annotations

import difflib

from maxkernel_tui.agents.search.algorithms import (
    Moves,
    NodePlan,
    growable_or_root,
    mutation,
    rotated,
)
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.graph import ROOT, Node, SearchGraph
from maxkernel_tui.agents.strategies import Strategy

NOVELTY_WEIGHT = 0.5  # a kernel unlike its island's others is worth half a rank of fitness
MIGRATE_EVERY = 2  # generations between migrations


def crossover(a: Node, b: Node, **tags: object) -> NodePlan:
    plan = f"crossover of #{a.number} and #{b.number}: keep what makes each of them fast"
    instruction = (
        f"Crossover. Two accepted kernels for this task follow: #{a.number} (the current kernel) "
        f"and #{b.number}. Write one kernel that combines their strengths: take the tiling, "
        "pipelining and layout choices that make each fast, keep it correct on every "
        "configuration, and say in the plan which parts come from which parent.\n\n"
        f"Kernel #{a.number}:\n```python\n{a.source}```\n\n"
        f"Kernel #{b.number}:\n```python\n{b.source}```"
    )
    return NodePlan((a.ref, b.ref), "crossover", plan, instruction, dict(tags))


def novelty(node: Node, others: list[Node]) -> float:
    """1 minus the similarity of `node`'s source to the most similar of `others` (0..1)."""
    rest = [o for o in others if o.ref != node.ref]
    if not rest:
        return 1.0
    return 1.0 - max(difflib.SequenceMatcher(None, node.source, o.source).ratio() for o in rest)


class Evolve:
    def __init__(
        self, config: SearchConfig, strategies: list[Strategy], moves: Moves | None = None
    ) -> None:
        self.islands, self.strategies = config.islands, strategies
        self.moves = moves or Moves()
        self.per_island = max(1, config.population // config.islands)
        self.migrants: dict[int, list[str]] = {i: [] for i in range(self.islands)}
        self.ended = ""

    def plan_round(self, graph: SearchGraph, round_: int) -> list[NodePlan]:
        root = graph[ROOT]
        if root.pruned_round is not None and root.pruned_round < round_:
            return []
        if round_ > 1 and (round_ - 1) % MIGRATE_EVERY == 0:
            self._migrate(graph, round_)
        plans = []
        for island in range(self.islands):
            pool = self.population(graph, island, round_)
            for k in range(self.per_island):
                if k % 2 == 1 and len(pool) >= 2:
                    a, b = pool[(k // 2) % len(pool)], pool[(k // 2 + 1) % len(pool)]
                    if self.moves.allows(a, "crossover"):  # else a mutation takes its place
                        plans.append(crossover(a, b, island=island))
                        continue
                parent = pool[k % len(pool)] if pool else root
                index = island * self.per_island + (round_ - 1) * self.islands * self.per_island + k
                usable = self.moves.usable(parent, rotated(self.strategies, index))
                if usable:
                    plans.append(mutation((parent.ref,), usable[0], island=island))
        return plans

    def population(self, graph: SearchGraph, island: int, round_: int) -> list[Node]:
        """The island's kernels that may be parents, in the order they are picked: fitness rank
        plus novelty, best first; at most two generations' worth of them."""
        members = [
            n for n in graph.in_order() if n.tags.get("island") == island and n.round < round_
        ]
        members += [graph[ref] for ref in self.migrants[island]]
        pool = growable_or_root(graph, list({n.ref: n for n in members}.values()), round_)
        if not pool:
            return []
        ranked = graph.ranked(pool)
        fitness = {n.ref: 1.0 - i / len(ranked) for i, n in enumerate(ranked)}
        chosen = sorted(
            pool,
            key=lambda n: (
                -(fitness.get(n.ref, 0.0) + NOVELTY_WEIGHT * novelty(n, pool)),
                n.number,
            ),
        )
        return chosen[: 2 * self.per_island]

    def _migrate(self, graph: SearchGraph, round_: int) -> None:
        """Each island's best joins the next island (a ring): no new node, only membership."""
        bests = {}
        for island in range(self.islands):
            pool = graph.ranked(self.population(graph, island, round_))
            if pool:
                bests[island] = pool[0].ref
        for island, ref in bests.items():
            target = (island + 1) % self.islands
            if target != island and ref not in self.migrants[target]:
                self.migrants[target].append(ref)
