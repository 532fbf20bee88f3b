"""The session store's vocabularies (how a session's proposals are decided, a session's state,
a search node's state, an event's kind) and its error. Stdlib only; apart from the rows
(rows.py), so that the workbench's first frame names a mode without making the rows'
dataclasses."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """How a session's proposals are decided: by the engineer, approved, or by a graph search."""

    HITL = "hitl"
    AUTO = "auto"
    GRAPH = "graph"


class SessionStatus(StrEnum):
    """A session's state in the store; only the engine (and a search's runner) changes it."""

    ACTIVE = "active"
    STOPPED = "stopped"
    DONE = "done"
    FAILED = "failed"


class NodeStatus(StrEnum):
    """A search node's state: the vocabulary of the graph's nodes, their store rows and their
    events; the final ones are not run again by a resumed search."""

    PENDING = "pending"
    RUNNING = "running"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    MERGED = "merged"
    STOPPED = "stopped"
    FAILED = "failed"
    PRUNED = "pruned"


class SteerAction(StrEnum):
    """What the engineer did to steer a graph search: the vocabulary of the store's `steering`
    rows and of the `steered` events that say when the search took each one up."""

    IDEA = "idea"  # free text to the implementer, expanded from a node next round
    STRATEGY = "strategy"  # one of the library's strategies, from a node next round
    EXPAND = "expand"  # a node expanded next round, with the next strategy its path lacks
    PIN = "pin"  # pruning keeps the node and the beam keeps it
    UNPIN = "unpin"
    TARGET = "target"  # the TPU generation the score is estimated for, from now on
    HAND_CHILD = "hand-child"  # a kernel the engineer wrote from a node: judged as its child
    COMPARE = "compare"  # two nodes side by side (a view: the search itself is unchanged)


class BestRule(StrEnum):
    """Which rule picked a session's best kernel (Store.best_kernel): the one definition every
    screen and command shows."""

    BEST_SCORE = "the best score among its accepted versions"
    LATEST_ACCEPTED = "the latest accepted version (none has a score)"
    NOTHING_ACCEPTED = "no version accepted: the latest version"


class EventKind(StrEnum):
    """The kind of a session's event: the store's `kind` column, one per event class
    (agents/orchestration/events.py). A kind this release does not know (an older store's)
    is read back as its text."""

    SESSION_STARTED = "session_started"
    STEP_STARTED = "step_started"
    TEXT = "text"
    LLM_ANSWER = "llm_answer"
    TOOLS_CALLED = "tools_called"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    PROPOSAL = "proposal"
    DECISION = "decision"
    VERSION = "version"
    EVALUATION = "evaluation"
    EARLIER_VERDICT = "earlier_verdict"
    PROPOSAL_REPEATED = "proposal_repeated"
    PROFILE = "profile"
    NOTE = "note"
    EDGE_CASES = "edge_cases"
    INTERVENTION = "intervention"
    MODE = "mode"
    BUDGET = "budget"
    ERROR = "error"
    SESSION_ENDED = "session_ended"
    SEARCH_NODE = "search_node"
    STRATEGY_SKIPPED = "strategy_skipped"
    STEERED = "steered"


HITL, AUTO, GRAPH = Mode.HITL, Mode.AUTO, Mode.GRAPH
MODES = tuple(Mode)
ACTIVE, STOPPED, DONE, FAILED = (
    SessionStatus.ACTIVE,
    SessionStatus.STOPPED,
    SessionStatus.DONE,
    SessionStatus.FAILED,
)


class StoreError(Exception):
    """The store cannot be opened or a request cannot be met; the message says why."""
