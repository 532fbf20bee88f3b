"""Typed rows of the session store. Plain data; times are Unix seconds. The vocabularies they
use live in kinds.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.store.kinds import (
    BestRule,
    EventKind,
    Mode,
    NodeStatus,
    SessionStatus,
    SteerAction,
)

# A session's columns, and its task's folder from the first event that names one (the session's
# start: its payload has `task_dir`), so that a session written before that folder had a column
# of its own is told apart from a session on another task with the same id too.
SESSION_COLUMNS = (
    "id, task_id, mode, status, title, created, updated, COALESCE((SELECT json_extract("
    "payload, '$.task_dir') FROM events WHERE events.session_id = sessions.id AND "
    "json_extract(payload, '$.task_dir') IS NOT NULL ORDER BY seq LIMIT 1), '')"
)


@dataclass(frozen=True)
class Session:
    id: str
    task_id: str
    mode: Mode
    status: SessionStatus
    title: str
    created: float
    updated: float
    # The task's folder as its session recorded it when it started ("" before then): a task
    # is named by its folder, since two folders may hold tasks with the same id.
    task_dir: str = ""

    @classmethod
    def of_row(cls, row: tuple[Any, ...]) -> Session:
        """A `sessions` row (`SESSION_COLUMNS` in order), its vocabularies typed."""
        id_, task_id, mode, status, *rest = row
        return cls(id_, task_id, Mode(mode), SessionStatus(status), *rest)


@dataclass(frozen=True)
class Event:
    session_id: str
    seq: int  # 1, 2, 3, ... within the session, no gaps
    kind: EventKind | str  # str: a kind this release does not know, as an older store kept it
    payload: dict[str, Any]
    time: float

    @classmethod
    def of_row(cls, row: tuple[Any, ...]) -> Event:
        """An `events` row (session_id, seq, kind, payload, time), its kind typed when known."""
        session_id, seq, kind, payload, time = row
        known = kind in EventKind.__members__.values()
        return cls(session_id, seq, EventKind(kind) if known else kind, json.loads(payload), time)


@dataclass(frozen=True)
class KernelVersion:
    id: int  # unique in the store
    session_id: str
    number: int  # 1, 2, 3, ... within the session (the "v4" a user sees)
    parent_id: int | None
    source: str
    plan: str
    created: float


@dataclass(frozen=True)
class Evaluation:
    id: int
    kernel_version_id: int
    verdict: Verdict  # EvalReport.verdict
    report: dict[str, Any]  # EvalReport.to_json()
    created: float


@dataclass(frozen=True)
class Profile:
    id: int
    kernel_version_id: int
    profile: dict[str, Any]
    created: float


@dataclass(frozen=True)
class LlmCall:
    id: int
    session_id: str
    model: str
    provider: str
    prompt_tokens: int
    completion_tokens: int
    cost: float  # dollars
    latency_s: float
    error: str | None
    created: float


@dataclass(frozen=True)
class SearchNode:
    id: int
    session_id: str
    parent_id: int | None
    kernel_version_id: int | None
    strategy: str
    status: NodeStatus
    score: float | None
    data: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0
    updated: float = 0.0


@dataclass(frozen=True)
class SteeringRow:
    """One steering action given to a search (store/steering.py): `payload` is the action's
    own data (agents/search/steering.py reads it)."""

    id: int
    session_id: str
    action: SteerAction
    payload: dict[str, Any]
    created: float


@dataclass(frozen=True)
class BestKernel:
    """A session's best kernel by the store's one rule (`Store.best_kernel`), and which rule
    picked it."""

    version: KernelVersion
    evaluation: Evaluation | None  # its latest evaluation; None: not evaluated
    rule: BestRule
    score: float | None  # under BEST_SCORE: its score, of `score_kind`
    # "estimated speedup vs XLA@3-pass (tolerance) on v5e", ...; "" without a score
    score_kind: str
    score_also: str = ""  # the other speedup over XLA, labelled; "" where none was kept

    @property
    def accepted(self) -> bool:
        return self.rule != BestRule.NOTHING_ACCEPTED

    def score_words(self) -> str:
        """`1.02 (estimated speedup vs XLA@3-pass (tolerance) on v5e; 0.35x XLA@1-pass (as
        written) (est., v5e))`, or `no score`."""
        if self.score is None:
            return "no score"
        also = f"; {self.score_also}" if self.score_also else ""
        return f"{self.score:.3g} ({self.score_kind}{also})"

    def words(self) -> str:
        """`v6, the best score among its accepted versions: 1.42 (...)`: the version and why."""
        scored = f": {self.score_words()}" if self.score is not None else ""
        return f"v{self.version.number}, {self.rule}{scored}"


@dataclass(frozen=True)
class SessionSummary:
    """A line of `maxkernel-tui sessions`."""

    session: Session
    kernel_versions: int
    best: BestKernel | None  # None: no kernel version yet
    tokens: int
    cost: float

    @property
    def best_version(self) -> int | None:
        return None if self.best is None else self.best.version.number

    @property
    def best_verdict(self) -> Verdict | None:
        """The best kernel's latest verdict; None: not evaluated (or no kernel)."""
        evaluation = None if self.best is None else self.best.evaluation
        return None if evaluation is None else evaluation.verdict
