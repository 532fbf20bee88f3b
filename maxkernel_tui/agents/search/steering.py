"""The engineer's steering of a graph search: the actions (`Steer`, its vocabulary the store's
`SteerAction`), how they are given (`give`: stored at once, by any process), and how the search
takes them up (`Steering`): at the start of each round it reads what is new, announces each with
a `Steered` event that names the round it belongs to, and adds the nodes they ask for to that
round. A resumed search reads those events back, so it plans every round it replays with the
steering it had then, and takes up what was given since at its first new round. No jax here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.events import Steered
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.search.algorithms import NodePlan, mutation, path_strategies
from maxkernel_tui.agents.search.graph import Node, SearchGraph
from maxkernel_tui.agents.strategies import Strategy
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import SteerAction
from maxkernel_tui.store.rows import SteeringRow
from maxkernel_tui.store.steering import add_steering, steering

IDEA = "idea"  # the strategy name of a node grown from the engineer's idea
BY_HAND = "by hand"  # ... of a node whose kernel the engineer wrote
STEERING_SKIP = "steering "  # how the graph's skips name steering that grew no node
# The actions that add a node to the round that takes them up.
GROWING = frozenset(
    {SteerAction.IDEA, SteerAction.STRATEGY, SteerAction.EXPAND, SteerAction.HAND_CHILD}
)


@dataclass(frozen=True)
class Steer:
    """One steering action. `node`: the ref it is given at ("n3"); `other`: compare's second
    node; `text`: an idea; `strategy`: a library strategy's name; `target`: a TPU generation;
    `source`: a hand-made kernel. `id`: its store row, once given."""

    action: SteerAction
    node: str = ""
    text: str = ""
    strategy: str = ""
    target: str = ""
    other: str = ""
    source: str = ""
    id: int = 0

    def payload(self) -> dict[str, str]:
        fields = {
            "node": self.node,
            "text": self.text,
            "strategy": self.strategy,
            "target": self.target,
            "other": self.other,
            "source": self.source,
        }
        return {name: value for name, value in fields.items() if value}

    @classmethod
    def of(cls, row: SteeringRow) -> Steer:
        data = {k: str(v) for k, v in row.payload.items() if k in _FIELDS}
        return cls(row.action, id=row.id, **data)

    def words(self) -> str:
        """What it asks, in words: `idea at #3: "try a 256-wide K block"`."""
        at = f" at #{self.node.removeprefix('n')}" if self.node else ""
        match self.action:
            case SteerAction.IDEA:
                return f'idea{at}: "{self.text}"'
            case SteerAction.STRATEGY:
                return f"strategy {self.strategy}{at}"
            case SteerAction.EXPAND:
                return f"expand{at} next"
            case SteerAction.PIN | SteerAction.UNPIN:
                return f"{self.action}{at}"
            case SteerAction.TARGET:
                return f"score on TPU {self.target}"
            case SteerAction.HAND_CHILD:
                lines = len(self.source.splitlines())
                return f"a kernel by hand{at} ({lines} lines)"
            case SteerAction.COMPARE:
                return f"compare{at} with #{self.other.removeprefix('n')}"
        return str(self.action)


_FIELDS = ("node", "text", "strategy", "target", "other", "source")


# The CLI's words for the actions (`--steer idea@3=TEXT`); a comparison is a view, not given there.
CLI_ACTIONS = {
    "idea": SteerAction.IDEA,
    "strategy": SteerAction.STRATEGY,
    "expand": SteerAction.EXPAND,
    "pin": SteerAction.PIN,
    "unpin": SteerAction.UNPIN,
    "target": SteerAction.TARGET,
    "hand": SteerAction.HAND_CHILD,
}
STEER_FORMS = (
    "idea@N=TEXT, strategy@N=NAME, expand@N, pin@N, unpin@N, target=TPU, hand@N=FILE "
    "(N: a node's number)"
)


def parse_steer(text: str, read: Callable[[str], str]) -> Steer:
    """`idea@3=try a 256-wide K block` as a Steer; `read(path)` gives a hand-made kernel's
    source. A ValueError names the forms for anything else."""
    head, _, value = text.partition("=")
    name, _, number = head.partition("@")
    action = CLI_ACTIONS.get(name.strip())
    if action is None or (number and not number.strip().lstrip("#").isdigit()):
        raise ValueError(f"cannot read --steer {text!r}: give one of {STEER_FORMS}")
    node = f"n{number.strip().lstrip('#')}" if number else ""
    value = value.strip()
    needs_value = action in (
        SteerAction.IDEA,
        SteerAction.STRATEGY,
        SteerAction.TARGET,
        SteerAction.HAND_CHILD,
    )
    if needs_value and not value:
        raise ValueError(f"--steer {text!r} needs a value: give one of {STEER_FORMS}")
    match action:
        case SteerAction.IDEA:
            return Steer(action, node=node, text=value)
        case SteerAction.STRATEGY:
            return Steer(action, node=node, strategy=value)
        case SteerAction.TARGET:
            return Steer(action, target=value)
        case SteerAction.HAND_CHILD:
            return Steer(action, node=node, source=read(value))
    return Steer(action, node=node)


def give(store: Store, session_id: str, steer: Steer) -> Steer:
    """Store `steer` for the search `session_id` (running here, elsewhere, or not at all: it is
    taken up at the search's next round, or when it is resumed). The steer with its row id."""
    if steer.action in GROWING | {SteerAction.PIN, SteerAction.UNPIN} and not steer.node:
        raise ValueError(f"{steer.action} needs a node")
    row = add_steering(store, session_id, steer.action, steer.payload())
    return Steer.of(row)


def given(store: Store, session_id: str) -> list[Steer]:
    """Every steering action given to the search, oldest first."""
    return [Steer.of(row) for row in steering(store, session_id)]


def pinned(steers: list[Steer]) -> set[str]:
    """The nodes pinned now: the last pin or unpin of each node decides."""
    state: dict[str, bool] = {}
    for steer in steers:
        if steer.action in (SteerAction.PIN, SteerAction.UNPIN):
            state[steer.node] = steer.action == SteerAction.PIN
    return {node for node, pin in state.items() if pin}


class Steering:
    """What a running search was told, and when it took each action up."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.store, self.session_id = journal.store, journal.session_id
        # steer id -> the round it was taken up at, from the search's own events (a resume)
        self.taken: dict[int, int | None] = {
            e.steer_id: e.round for e in journal.history() if isinstance(e, Steered)
        }
        self.steers: dict[int, Steer] = {}

    def all(self) -> list[Steer]:
        """Every action given so far, read again from the store (any process may add one)."""
        for steer in given(self.store, self.session_id):
            self.steers.setdefault(steer.id, steer)
        return [self.steers[k] for k in sorted(self.steers)]

    def pinned(self) -> set[str]:
        return pinned(self.all())

    def target(self) -> str | None:
        """The TPU generation the engineer last asked the score for (taken up), if any."""
        chosen = [
            s.target for s in self.all() if s.action == SteerAction.TARGET and s.id in self.taken
        ]
        return chosen[-1] if chosen else None

    def take_up(self, round_: int, fresh: bool) -> list[Steer]:
        """The actions that add nodes to `round_`: those taken up at it before (a replayed
        round), and, when the round is `fresh` (planned now for the first time), every one not
        taken up yet. The others (a pin, the score's generation) are taken up at any round."""
        for steer in self.all():
            if steer.id in self.taken or (steer.action in GROWING and not fresh):
                continue
            when = round_ if steer.action in GROWING else None
            self.journal.emit(
                Steered(
                    keys.steered(steer.id), steer.id, steer.action, steer.node, when, steer.words()
                )
            )
            self.taken[steer.id] = when
        return [s for s in self.all() if self.taken.get(s.id, -1) == round_]

    def plans(
        self, graph: SearchGraph, round_: int, strategies: list[Strategy], steers: list[Steer]
    ) -> list[NodePlan]:
        """The nodes `steers` (taken up at `round_`) add to it, in the order they were given.
        One at a node the graph does not have, or at a node that has no accepted kernel to grow
        from, adds none: the graph keeps it as skipped, with why."""
        plans = []
        for steer in steers:
            if steer.action not in GROWING:
                continue
            node = graph.nodes.get(steer.node)
            # a kernel by hand may grow from any node (it may fix a rejected one)
            why = (
                "no such node"
                if node is None
                else None
                if steer.action == SteerAction.HAND_CHILD or graph.growable(node, round_)
                else f"#{node.number} has no accepted kernel to grow from ({node.status})"
            )
            if node is None or why is not None:
                graph.skip(steer.node, f"{STEERING_SKIP}{steer.action}", f"{steer.words()}: {why}")
                continue
            plan = _plan(graph, node, round_, strategies, steer)
            if plan is not None:
                plans.append(plan)
        return plans

    def waiting(self) -> bool:
        """An action was given and not taken up yet."""
        return any(s.id not in self.taken for s in self.all())

    def hand_source(self, steer_id: int) -> str:
        return self.steers[steer_id].source if steer_id in self.steers else ""


def _plan(
    graph: SearchGraph, node: Node, round_: int, strategies: list[Strategy], steer: Steer
) -> NodePlan | None:
    tags = {"steer": steer.id}
    parents = (node.ref,)
    match steer.action:
        case SteerAction.IDEA:
            text = (
                f"The engineer asks you to try this on the current kernel: {steer.text} "
                "Keep the kernel correct on every configuration."
            )
            return NodePlan(parents, IDEA, f"the engineer's idea: {steer.text}", text, tags)
        case SteerAction.STRATEGY:
            chosen = next((s for s in strategies if s.name == steer.strategy), None)
            return None if chosen is None else mutation(parents, chosen, **tags)
        case SteerAction.EXPAND:
            used = path_strategies(graph, node, round_)
            fresh = [s for s in strategies if s.name not in used] or strategies
            return mutation(parents, fresh[0], **tags) if fresh else None
        case SteerAction.HAND_CHILD:
            plan = f"a kernel the engineer wrote from #{node.number}"
            return NodePlan(parents, BY_HAND, plan, "", tags)
    return None
