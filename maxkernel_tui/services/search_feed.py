"""A graph search as the search screen shows it, and how the screen hears that it changed.

`SearchFeed.read` gives the search's state (`SearchFacts`: its nodes with their kernels, the
strategies skipped, its cap, usage, and why it ended) from the store: this module is the
screen's only reader of the store. A search running in this process is followed through its
journal: the events go through the same batched delivery as the workbench's
(services/delivery.py) to the screen, which reads again when they come. A search running in
another process sends no events here, so the screen reads it again now and then (`live` is
False). No Textual, no jax."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from maxkernel_tui.agents.orchestration.ending import best_at_end
from maxkernel_tui.agents.search.config import stored_search
from maxkernel_tui.agents.search.graph import Node, NodeSet, load_nodes
from maxkernel_tui.agents.search.steering import Steer, give, given, pinned
from maxkernel_tui.kernels.perf.vs_xla import XlaBaseline
from maxkernel_tui.services.delivery import BatchedDelivery, Deliver
from maxkernel_tui.services.evidence import CardSubject, EvidenceCard, report_card, version_card
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import SessionStatus, SteerAction
from maxkernel_tui.store.rows import BestKernel
from maxkernel_tui.store.steering import taken_up

if TYPE_CHECKING:
    from maxkernel_tui.agents.orchestration.events import SessionEvent
    from maxkernel_tui.agents.orchestration.journal import Journal


@dataclass(frozen=True)
class Skipped:
    """A strategy the agent had no move for on a node's kernel."""

    node: str
    strategy: str
    reason: str


# Steering in force the moment it is given, whatever the search does next.
AT_ONCE = frozenset({SteerAction.PIN, SteerAction.UNPIN, SteerAction.COMPARE})


@dataclass(frozen=True)
class SteerShown:
    """A steering action as the screen lists it: taken up (at `round`, None: at once) or
    waiting for the search's next round."""

    steer: Steer
    taken: bool
    round: int | None

    def words(self) -> str:
        if self.steer.action in AT_ONCE:
            return self.steer.words()  # in force (a pin) or shown (a comparison) when given
        if not self.taken:
            return f"{self.steer.words()}: waiting for the next round"
        when = "taken up" if self.round is None else f"its node in round {self.round}"
        return f"{self.steer.words()}: {when}"


@dataclass(frozen=True)
class SearchFacts:
    nodes: NodeSet
    skipped: list[Skipped]
    max_evals: int | None  # the search's cap on evaluations (None: none known)
    tokens: int
    cost_usd: float
    ended: str | None  # why the search ended, once it has
    best: BestKernel | None  # its best accepted kernel by the store's one rule; None: none yet
    steering: list[SteerShown] = field(default_factory=list)  # oldest first
    pinned: set[str] = field(default_factory=set)
    rank_by: XlaBaseline | None = None  # which speedup over XLA it ranks by; None: not known yet


class SearchFeed:
    """One search's state for a view, and (`live`) its events as they happen."""

    def __init__(
        self,
        store_path: Path,
        session_id: str,
        *,
        delivery: BatchedDelivery[SessionEvent] | None = None,
        max_evals: int | None = None,
    ) -> None:
        """`delivery`: the search's events, collected from its journal (a search in this
        process); None for a search in another process."""
        self.session_id = session_id
        self._store = Store(store_path)  # a reader of its own: the search writes through its own
        self._delivery = delivery
        if delivery is not None:
            delivery.ended = lambda: self._over
        self._max_evals = max_evals
        self._sources: dict[int, str] = {}  # kernel sources by version: read once
        self._ended: str | None = None
        self._over = False  # the search's run has returned (`finished`)

    @classmethod
    def following(
        cls, journal: Journal, store_path: Path, *, max_evals: int | None = None
    ) -> SearchFeed:
        """The feed of the search whose journal this is, running in this process (call it on
        the event loop, before the search runs, so that no event is missed)."""
        delivery: BatchedDelivery[SessionEvent] = BatchedDelivery(asyncio.get_running_loop())
        journal.subscribe(delivery.collect)
        return cls(store_path, journal.session_id, delivery=delivery, max_evals=max_evals)

    def finished(self) -> None:
        """The search's run has returned (ended, stopped or cancelled): the view hears it even
        when no event said so (a cancelled search ends without one)."""
        self._over = True
        if self._delivery is not None:
            self._delivery.schedule()

    @property
    def live(self) -> bool:
        """The search's events reach the view (it runs in this process); else it is read again
        now and then."""
        return self._delivery is not None

    def attach(self, deliver: Deliver[SessionEvent]) -> None:
        """Where the search's events go, batched, from now on (those before wait for it)."""
        assert self._delivery is not None, "a search in another process sends no events"
        self._delivery.attach(deliver)

    def read(self) -> SearchFacts:
        nodes = NodeSet(load_nodes(self._store, self.session_id, self._sources))
        skipped: list[Skipped] = []
        rank_by = None
        if nodes.nodes:  # the search's settings and skipped strategies live with its root
            extra = self._store.search_node(nodes.in_order()[0].row_id).data.get("extra", {})
            if self._max_evals is None:  # a search in another process: its stored cap
                self._max_evals = extra.get("config", {}).get("max_evals")
            skipped = [Skipped(*entry) for entry in extra.get("skipped", [])]
            stored = stored_search(extra)
            rank_by = stored.config.rank_by if stored else None
        tokens, cost = self._store.usage(self.session_id)
        if self._ended is None and self._store.session(self.session_id).status != (
            SessionStatus.ACTIVE
        ):
            ending = best_at_end(self._store, self.session_id)
            self._ended = ending.reason if ending is not None else "ended"
        found = self._store.best_kernel(self.session_id)
        best = found if found is not None and found.accepted else None
        steers = given(self._store, self.session_id)
        taken = taken_up(self._store, self.session_id)
        shown = [SteerShown(s, s.id in taken, taken.get(s.id)) for s in steers]
        return SearchFacts(
            nodes,
            skipped,
            self._max_evals,
            tokens,
            cost,
            self._ended,
            best,
            shown,
            pinned(steers),
            rank_by,
        )

    def steer(self, steer: Steer) -> Steer:
        """Give the search a steering action (stored now; the search, here or in another
        process, takes it up at its next round)."""
        return give(self._store, self.session_id, steer)

    def card(self, node: Node) -> EvidenceCard:
        """The evidence card of a search node: its kernel's stored evaluation and profile, and
        what its steps cost."""
        title = f"search node #{node.number} ({node.strategy})"
        cost_of = f"node #{node.number}'s steps: {node.evals} evaluations"
        if node.version_id is None:
            task_id = self._store.session(self.session_id).task_id
            return report_card(
                CardSubject.NODE,
                title,
                task_id,
                None,
                None,
                tokens=node.tokens,
                cost_usd=node.cost_usd,
                cost_of=cost_of,
                notes=[f"{node.status}: {node.detail}" if node.detail else str(node.status)],
            )
        return version_card(
            self._store,
            node.version_id,
            CardSubject.NODE,
            title,
            tokens=node.tokens,
            cost_usd=node.cost_usd,
            cost_of=cost_of,
        )

    def close(self) -> None:
        self._store.close()
