"""The search graph: its nodes, persisted in the store's `search_nodes` and announced as
`SearchNodeChanged` events whenever they change, so that the store, the event log and a live
view always say the same. Nodes are keyed by a ref ("n7") that is the same on every run of the
search: creating a node that exists returns it, which is what makes a resumed search idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.events import SearchNodeChanged, StrategySkipped
from maxkernel_tui.agents.orchestration.fingerprint import kernel_hash
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import NodeStatus
from maxkernel_tui.store.rows import SearchNode

PENDING, RUNNING, ACCEPTED, REJECTED, MERGED, STOPPED, FAILED, PRUNED = tuple(NodeStatus)
FINAL = frozenset({ACCEPTED, REJECTED, MERGED, PRUNED})  # a resumed search does not run these again
ROOT = "n0"


@dataclass
class Node:
    ref: str
    number: int
    round: int
    parents: list[str]
    strategy: str
    plan: str = ""  # what the implementer was asked to do (a strategy's instruction, a crossover)
    status: NodeStatus = PENDING
    score: float | None = None
    score_kind: str = ""
    score_also: str = ""  # the other speedup over XLA, labelled (scoring.Score.also)
    version_id: int | None = None
    source: str = ""
    hash: str = ""
    evals: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    detail: str = ""
    executor_node: str = ""  # where its last evaluation ran ("local" or a Ray node)
    # What its kernel's verdict rests on (EvalReport.evidence) and, when accepted, the shapes it
    # was earned at (EvalReport.scope): "verified at production shapes" or small shapes only.
    evidence: list[str] = field(default_factory=list)
    scope: str = ""
    # The performance model's view of an accepted kernel (headroom.py): share of the task's
    # roofline, what bounds it, on which generation and on what basis; a score alone cannot say
    # whether there is anything left to find.
    roofline_share: float | None = None
    reachable_share: float | None = None  # over roofline plus dispatch: what headroom is judged by
    bound: str = ""
    model_target: str = ""
    model_basis: str = ""
    merged_into: str | None = None
    pruned_round: int | None = None  # from the round after this one, nothing grows from the node
    tags: dict[str, Any] = field(default_factory=dict)  # the algorithm's bookkeeping: line, island
    row_id: int = 0
    updated: float = 0.0

    @property
    def final(self) -> bool:
        return self.status in FINAL

    def score_words(self) -> str:
        """`1.02 (estimated speedup vs XLA@3-pass (tolerance) on v5e; 0.35x XLA@1-pass (as
        written) (est., v5e))`: the score, its kind and the other speedup; `no score`."""
        if self.score is None:
            return "no score"
        also = f"; {self.score_also}" if self.score_also else ""
        return f"{self.score:.3g} ({self.score_kind}{also})"

    def data(self) -> dict[str, Any]:
        """The node's `data` column: its fields that the row's own columns do not hold."""
        return {name: getattr(self, name) for name in _DATA_FIELDS}

    @classmethod
    def from_row(cls, row: SearchNode) -> Node:
        """The node a stored row holds (its `data` column as `data` wrote it)."""
        stored = {k: v for k, v in row.data.items() if k in _DATA_FIELDS}
        return cls(
            **stored,
            strategy=row.strategy,
            status=row.status,
            score=row.score,
            version_id=row.kernel_version_id,
            row_id=row.id,
            updated=row.updated,
        )


# Every field but those the row has columns for, the source (in the kernel version) and the
# row's own bookkeeping.
_DATA_FIELDS = tuple(
    f.name
    for f in fields(Node)
    if f.name not in ("strategy", "status", "score", "version_id", "source", "row_id", "updated")
)


def load_nodes(store: Store, session_id: str, sources: dict[int, str] | None = None) -> list[Node]:
    """The session's nodes as stored, with their kernels' sources (`sources` caches them by
    kernel version, for a view that reads the graph again and again)."""
    cache = {} if sources is None else sources
    nodes = []
    for row in store.search_nodes(session_id):
        node = Node.from_row(row)
        if node.version_id is not None:
            if node.version_id not in cache:
                cache[node.version_id] = store.kernel_version(node.version_id).source
            node.source = cache[node.version_id]
        nodes.append(node)
    return nodes


class NodeSet:
    """Nodes read from the store, and how they rank: what a live view needs, without the log."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes: dict[str, Node] = {n.ref: n for n in nodes}

    def __getitem__(self, ref: str) -> Node:
        return self.nodes[ref]

    def __len__(self) -> int:
        return len(self.nodes)

    def in_order(self) -> list[Node]:
        return sorted(self.nodes.values(), key=lambda n: n.number)

    def children(self, ref: str) -> list[Node]:
        return [n for n in self.in_order() if n.parents and n.parents[0] == ref]

    def ancestors(self, ref: str) -> list[Node]:
        """Every node `ref` descends from through any of its parents, nearest first (`ref` itself
        excluded). Each node is visited once, so the walk ends even on a graph that a store
        written before merges kept the graph acyclic holds with a cycle."""
        seen, found, todo = {ref}, [], list(self.nodes[ref].parents)
        while todo:
            parent = todo.pop(0)
            if parent in seen or parent not in self.nodes:
                continue
            seen.add(parent)
            found.append(self.nodes[parent])
            todo += self.nodes[parent].parents
        return found

    def first_parent_line(self, ref: str) -> list[Node]:
        """`ref` and its first parents up to the root, each node once (the line a kernel grew
        along); a cycle stored by an older release ends the line where it closes."""
        line, seen = [self.nodes[ref]], {ref}
        while line[-1].parents and line[-1].parents[0] in self.nodes:
            parent = line[-1].parents[0]
            if parent in seen:
                break
            seen.add(parent)
            line.append(self.nodes[parent])
        return line

    def score_kind(self) -> str:
        """The kind the search ranks by: that of its first scored accepted node. Scores of another
        kind (a measured one among estimates) are never compared with it."""
        first = next(
            (n for n in self.in_order() if n.status == ACCEPTED and n.score is not None), None
        )
        return first.score_kind if first else ""

    def ranked(self, nodes: list[Node] | None = None) -> list[Node]:
        """Accepted nodes with a score of the search's kind, best first; never a rejected kernel."""
        kind = self.score_kind()
        pool = self.in_order() if nodes is None else nodes
        scored = [
            n for n in pool if n.status == ACCEPTED and n.score is not None and n.score_kind == kind
        ]
        return sorted(scored, key=lambda n: (-(n.score or 0.0), n.number))

    def holding(self, version_id: int) -> Node | None:
        """The accepted node whose kernel is version `version_id` (the session's best kernel is
        picked by the store's one rule, `Store.best_kernel`, and shown as its node)."""
        return next(
            (n for n in self.in_order() if n.status == ACCEPTED and n.version_id == version_id),
            None,
        )

    def growable(self, node: Node, round_: int) -> bool:
        """`node` may be a parent in `round_`: accepted, not merged away, not pruned before it."""
        return node.status == ACCEPTED and (
            node.pruned_round is None or node.pruned_round >= round_
        )


class SearchGraph(NodeSet):
    """The nodes of one search session, in creation order, written through the journal."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(load_nodes(journal.store, journal.session_id))
        self.journal = journal
        self.store, self.session_id = journal.store, journal.session_id
        root = self.store.search_nodes(self.session_id)[:1]
        self.extra: dict[str, Any] = (
            root[0].data.get("extra", {}) if root else {}
        )  # the search's config

    # -- writing ------------------------------------------------------------------------------

    def ensure(
        self,
        ref: str,
        *,
        number: int,
        round_: int,
        parents: list[str],
        strategy: str,
        plan: str,
        tags: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Node:
        """The node `ref`, created (stored and announced) unless it already exists."""
        if ref in self.nodes:
            return self.nodes[ref]
        node = Node(
            ref=ref,
            number=number,
            round=round_,
            parents=list(parents),
            strategy=strategy,
            plan=plan,
            tags=dict(tags or {}),
        )
        parent = self.nodes.get(parents[0]) if parents else None
        data = node.data() | ({"extra": extra} if extra else {})
        row = self.store.add_search_node(
            self.session_id,
            strategy=strategy,
            parent_id=parent.row_id if parent else None,
            status=PENDING,
            data=data,
        )
        node.row_id, node.updated = row.id, row.updated
        if extra:
            self.extra = extra
        self.nodes[ref] = node
        self._announce(node, "created")
        return node

    def update(
        self, node: Node, status: NodeStatus, *, why: str | None = None, **changes: Any
    ) -> Node:
        """Change `node`, store it, announce it. `why` names the change when the status stays."""
        for name, value in changes.items():
            setattr(node, name, value)
        if node.source and not node.hash:
            node.hash = kernel_hash(node.source)
        node.status = status
        data = node.data() | ({"extra": self.extra} if node.ref == ROOT and self.extra else {})
        row = self.store.update_search_node(
            node.row_id,
            status=status,
            score=node.score,
            kernel_version_id=node.version_id,
            data=data,
        )
        node.updated = row.updated
        self._announce(node, why or status)
        return node

    def merge_duplicates(self, nodes: list[Node]) -> None:
        """Merge each judged node whose kernel an earlier node already has into that node: one
        node per kernel, with every parent that led to it. Run in node order, so deterministic."""
        for node in sorted(nodes, key=lambda n: n.number):
            if node.status not in (ACCEPTED, REJECTED) or not node.hash:
                continue
            twin = next(
                (
                    n
                    for n in self.in_order()
                    if n.number < node.number
                    and n.hash == node.hash
                    and n.status in (ACCEPTED, REJECTED)
                ),
                None,
            )
            if twin is not None:
                self.merge(node, twin)

    def merge(self, node: Node, twin: Node, *, evaluated: bool = True) -> None:
        """`node` has `twin`'s kernel: one node per kernel, with every parent that led to it.
        A parent that descends from `twin` (a child that came back to an ancestor's kernel) is
        not added: the edge would make `twin` its own ancestor, a cycle no walk leaves."""
        for parent in node.parents:
            if parent not in twin.parents and not self._descends(parent, twin.ref):
                twin.parents.append(parent)
        self.update(twin, twin.status, why=f"merged {node.ref}")
        kin = "its ancestor " if self._descends(node.ref, twin.ref) else ""
        detail = f"same kernel as {kin}#{twin.number}" + ("" if evaluated else " (not evaluated)")
        self.update(node, MERGED, merged_into=twin.ref, detail=detail)

    def _descends(self, ref: str, ancestor: str) -> bool:
        """`ref` is `ancestor` or below it."""
        return ref == ancestor or any(a.ref == ancestor for a in self.ancestors(ref))

    def skip(self, node: str, strategy: str, reason: str) -> None:
        """Keep (with the search's settings, for a view) and announce a strategy skipped on
        `node` because the agent has no move for it there."""
        entry = [node, strategy, reason]
        skipped = self.extra.setdefault("skipped", [])
        if entry in skipped:
            return
        skipped.append(entry)
        root = self.nodes[ROOT]
        self.store.update_search_node(
            root.row_id,
            status=root.status,
            score=root.score,
            kernel_version_id=root.version_id,
            data=root.data() | {"extra": self.extra},
        )
        self.journal.emit(
            StrategySkipped(keys.strategy_skipped(node, strategy), node, strategy, reason)
        )

    def prune(
        self, ref: str, round_: int, keep: set[str] | frozenset[str] = frozenset()
    ) -> list[Node]:
        """Grow nothing more from `ref` and its descendants; those not started yet are dropped.
        The nodes in `keep` (pinned by the engineer) and what grows from them are kept."""
        pruned: list[Node] = []
        todo = [ref]
        while todo:
            node = self.nodes[todo.pop()]
            if node.pruned_round is not None or node.ref in keep:
                continue
            status = PRUNED if node.status == PENDING else node.status
            pruned.append(self.update(node, status, why="pruned", pruned_round=round_))
            todo += [n.ref for n in self.in_order() if node.ref in n.parents]
        return pruned

    def _announce(self, node: Node, what: str) -> None:
        self.journal.emit(
            SearchNodeChanged(
                keys.node_change(node.ref, what),
                node.ref,
                node.number,
                node.status,
                list(node.parents),
                node.strategy,
                node.score,
                node.score_kind,
                node.version_id,
                node.detail,
                list(node.evidence),
                node.scope,
                node.score_also,
            )
        )
