"""Typed events of a session. Each is persisted by the store before anyone sees it.

Every event has a `ref`, unique within its session and the same on every run of the same step:
on resume the engine replays its steps and an event whose ref is already stored is not written
or delivered again. The store's `kind` column is the class's `kind`. Events carry typed data
(`EvalReport`, `ProfileSummary`, the vocabularies' enums); they are converted once, here, where
the store writes them (`payload`: JSON) and reads them (`decode`, which also reads the forms
older releases stored).
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

from maxkernel_tui.agents.orchestration.gates import Action, Decider, Subject
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.store.kinds import EventKind, Mode, NodeStatus, SteerAction


@dataclass(frozen=True)
class SessionEvent:
    kind: ClassVar[EventKind]
    ref: str  # not "key": the store redacts fields named like credentials

    def payload(self) -> dict[str, Any]:
        """The event as the store keeps it: JSON values only (reports as their `to_json`)."""
        return {f.name: _stored(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class SessionStarted(SessionEvent):
    """What the session is about and how it runs: enough to resume it in another process."""

    kind: ClassVar[EventKind] = EventKind.SESSION_STARTED
    task_dir: str
    task_id: str
    mode: Mode
    target: str
    provider: str
    model: str
    limits: dict[str, Any] = field(default_factory=dict)
    # each role's own model, tools and tool calls per step (agents.tools.assignment.RolePlan)
    roles: dict[str, Any] = field(default_factory=dict)
    # the parameters whose gradients the task is judged on (the yaml's, or `--gradients`'), so
    # that a resumed session is judged as it started
    gradients: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StepStarted(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.STEP_STARTED
    step: str
    role: Role
    iteration: int
    title: str


@dataclass(frozen=True)
class TextChunk(SessionEvent):
    """Streamed model text, coalesced (a few per second, not one per token)."""

    kind: ClassVar[EventKind] = EventKind.TEXT
    step: str
    role: Role
    text: str


@dataclass(frozen=True)
class LlmAnswer(SessionEvent):
    """A complete model answer: on resume it is reused instead of paying for the call again.
    `tokens` and `cost_usd` are the step's whole conversation's, its turns that called tools
    included."""

    kind: ClassVar[EventKind] = EventKind.LLM_ANSWER
    step: str
    role: Role
    text: str
    model: str
    tokens: int
    cost_usd: float | None


@dataclass(frozen=True)
class ToolsCalled(SessionEvent):
    """A model turn that called tools instead of answering: on resume it is replayed, and the
    model is not asked that turn again."""

    kind: ClassVar[EventKind] = EventKind.TOOLS_CALLED
    step: str
    role: Role
    turn: int  # the step's model turns, from 0
    text: str  # what the model said beside the calls
    calls: list[dict[str, Any]]  # llm.types.ToolCall as a dict
    model: str
    tokens: int
    cost_usd: float | None


@dataclass(frozen=True)
class ToolAnswered(SessionEvent):
    """One tool call's result as the model read it (a refused or failed call too): on resume it
    is given to the model again, and the tool is not run again."""

    kind: ClassVar[EventKind] = EventKind.TOOL_RESULT
    step: str
    role: Role
    call_id: str
    name: str
    arguments: dict[str, Any]
    ok: bool
    text: str
    seconds: float


@dataclass(frozen=True)
class UsageReport(SessionEvent):
    """One attempt of a call (failed ones cost too) and the session's totals after it."""

    kind: ClassVar[EventKind] = EventKind.USAGE
    step: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    estimated: bool
    session_tokens: int
    session_cost_usd: float


@dataclass(frozen=True)
class ProposalMade(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.PROPOSAL
    step: str
    role: Role
    subject: Subject  # plan or kernel
    content: str
    previous: str  # what it would replace ("" when nothing)
    summary: str
    reverts: str = ""  # what of the engineer's changes it undoes ("" when nothing)
    nothing_new: bool = False  # no proposal: the role has nothing new (`summary` says why)


@dataclass(frozen=True)
class DecisionMade(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.DECISION
    step: str
    action: Action
    content: str | None = None
    feedback: str | None = None
    mode: Mode | None = None
    by: Decider | None = None  # who decided (None in sessions stored before it was kept)


@dataclass(frozen=True)
class VersionCreated(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.VERSION
    step: str
    version_id: int
    number: int
    origin: Role  # the role that wrote it: implementer, debugger, autotuner


@dataclass(frozen=True)
class EvaluationDone(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.EVALUATION
    step: str
    version_id: int
    verdict: Verdict
    failure: str | None  # "check: detail" of the first failed check
    report: EvalReport
    executor_node: str = "local"  # where it ran: this machine's pool, or a Ray node
    # what the verdict is keyed by (verdicts.py), hashed; not named "key": the store redacts
    # fields named like credentials. "" in events stored before kernels were judged once
    verdict_hash: str = ""
    version_number: int = 0  # the v-number a user sees; 0 in events stored before it was kept
    kernel_hash: str = ""  # fingerprint.kernel_hash of the kernel judged ("" in older events)


@dataclass(frozen=True)
class EarlierVerdict(SessionEvent):
    """A step's kernel was judged before (same normalised source, task snapshot, configurations
    and target): its earlier verdict stands, nothing is evaluated and no version is added."""

    kind: ClassVar[EventKind] = EventKind.EARLIER_VERDICT
    step: str
    version_id: int  # the version that was judged, which becomes the current kernel again
    version_number: int
    verdict: Verdict
    failure: str | None
    judged_at: str  # the step whose evaluation judged it
    report: EvalReport  # that evaluation's


@dataclass(frozen=True)
class ProposalRepeated(SessionEvent):
    """A role proposed a kernel already turned down: it is not shown at the gate, and the role is
    asked for another (`nothing_new`: it had none, and the step ends)."""

    kind: ClassVar[EventKind] = EventKind.PROPOSAL_REPEATED
    step: str
    role: Role
    rejection: str  # verdicts.Rejection.words()
    nothing_new: bool = False


@dataclass(frozen=True)
class ProfileDone(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.PROFILE
    step: str
    version_id: int | None  # None for an estimate only (an autotune candidate)
    score: float | None  # the fitness the loop ranks by
    # e.g. "estimated speedup vs XLA@3-pass (tolerance) on v5e" (perf/vs_xla.py)
    score_kind: str
    summary: ProfileSummary | None  # None when the profile failed
    error: str | None = None
    text: str = ""  # the summary as the agents read it (ProfileSummary.to_text())
    score_also: str = ""  # the other speedup over XLA, labelled (scoring.Score.also)


@dataclass(frozen=True)
class Note(SessionEvent):
    """A sub-agent's text that informs later steps without a gate (diagnosis, autotune log,
    answer)."""

    kind: ClassVar[EventKind] = EventKind.NOTE
    step: str
    role: Role
    text: str


@dataclass(frozen=True)
class EdgeCasesChosen(SessionEvent):
    """The tester's edge-case configurations after validation: the accepted ones join every later
    evaluation (a resumed session takes them from here, without validating again)."""

    kind: ClassVar[EventKind] = EventKind.EDGE_CASES
    step: str
    accepted: list[list[Any]]  # [name, params] pairs
    rejected: list[str]  # one reason per rejected proposal


@dataclass(frozen=True)
class Intervention(SessionEvent):
    """The engineer's edit of the source or plan, or a chat message, taken at a step boundary."""

    kind: ClassVar[EventKind] = EventKind.INTERVENTION
    step: str
    subject: Subject  # kernel | plan | message | mode
    content: str


@dataclass(frozen=True)
class ModeChanged(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.MODE
    step: str
    mode: Mode


@dataclass(frozen=True)
class BudgetReport(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.BUDGET
    step: str
    message: str


@dataclass(frozen=True)
class ErrorRaised(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.ERROR
    step: str
    role: Role  # ENGINE for the engine's own
    message: str


@dataclass(frozen=True)
class SessionEnded(SessionEvent):
    kind: ClassVar[EventKind] = EventKind.SESSION_ENDED
    reason: str
    best_version_id: int | None
    best_score: float | None
    score_kind: str
    best_version_number: int | None = None  # the v-number a user sees (absent in older events)
    score_also: str = ""  # the other speedup over XLA, labelled (scoring.Score.also)


@dataclass(frozen=True)
class SearchNodeChanged(SessionEvent):
    """A graph-search node as it is now (created, running, judged, merged, pruned); the store's
    `search_nodes` row says the same."""

    kind: ClassVar[EventKind] = EventKind.SEARCH_NODE
    node: str  # the node's ref within the search, e.g. "n7"
    number: int  # the "#7" a user sees
    status: NodeStatus
    parents: list[str]
    strategy: str
    score: float | None = None
    score_kind: str = ""
    version_id: int | None = None
    detail: str = ""
    evidence: list[str] = field(default_factory=list)  # the verdict's (EvalReport.evidence)
    scope: str = ""  # an accepted verdict's shapes (EvalReport.scope); "" otherwise
    score_also: str = ""  # the other speedup over XLA, labelled (scoring.Score.also)


@dataclass(frozen=True)
class StrategySkipped(SessionEvent):
    """A search strategy the agent has no move for on a node's kernel: skipped before it cost a
    node or an evaluation."""

    kind: ClassVar[EventKind] = EventKind.STRATEGY_SKIPPED
    node: str  # the parent it would have grown from
    strategy: str
    reason: str


@dataclass(frozen=True)
class Steered(SessionEvent):
    """The search took up one of the engineer's steering actions (the store's `steering` row
    `steer_id`): from `round` on (None: at once, nothing waits for a round)."""

    kind: ClassVar[EventKind] = EventKind.STEERED
    steer_id: int
    action: SteerAction
    node: str  # the node it was given at ("" for one about the whole search)
    round: int | None
    words: str  # what it asked, in words


EVENT_TYPES: dict[EventKind, type[SessionEvent]] = {
    cls.kind: cls
    for cls in (
        SessionStarted,
        StepStarted,
        TextChunk,
        LlmAnswer,
        ToolsCalled,
        ToolAnswered,
        UsageReport,
        ProposalMade,
        DecisionMade,
        VersionCreated,
        EvaluationDone,
        EarlierVerdict,
        ProposalRepeated,
        ProfileDone,
        Note,
        EdgeCasesChosen,
        Intervention,
        ModeChanged,
        BudgetReport,
        ErrorRaised,
        SessionEnded,
        SearchNodeChanged,
        StrategySkipped,
        Steered,
    )
}


def decode(kind: EventKind | str, payload: dict[str, Any]) -> SessionEvent:
    """A stored event back as its class, typed; unknown fields (from a newer release) are
    dropped, and the forms older releases stored are read (`_upgraded`). A kind this release
    does not know (the store's row keeps it as text) is refused."""
    try:
        cls = EVENT_TYPES[EventKind(kind)]
    except ValueError:
        known = ", ".join(EventKind)
        raise KeyError(f"no event of kind {kind!r} in this release; known: {known}") from None
    readers = _readers(cls)
    if cls is DecisionMade and payload.get("by") == "":
        payload = {**payload, "by": None}  # an older release kept "" for "not known"
    values = {
        name: raw if raw is None else readers[name](raw)
        for name, raw in payload.items()
        if name in readers
    }
    return cls(**_upgraded(cls, payload, values))


def _stored(value: Any) -> Any:
    if isinstance(value, EvalReport | ProfileSummary):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    return copy.deepcopy(value)  # the event stays immutable whatever the store does


def _role(value: str) -> Role:
    return Role(value or Role.ENGINE)  # older releases stored the engine's errors with ""


def _summary(value: dict[str, Any]) -> ProfileSummary | None:
    return ProfileSummary.from_json(value) if value else None  # {}: the profile failed


_TYPED_READERS: dict[type, Callable[[Any], Any]] = {
    Role: _role,
    EvalReport: EvalReport.from_json,
    ProfileSummary: _summary,
}


_READERS: dict[type[SessionEvent], dict[str, Callable[[Any], Any]]] = {}


def _readers(cls: type[SessionEvent]) -> dict[str, Callable[[Any], Any]]:
    """How each field of `cls` is read from its stored JSON value (None is read as None)."""
    if cls not in _READERS:
        _READERS[cls] = _field_readers(cls)
    return _READERS[cls]


def _field_readers(cls: type[SessionEvent]) -> dict[str, Callable[[Any], Any]]:
    hints = get_type_hints(cls)
    readers: dict[str, Callable[[Any], Any]] = {}
    for f in fields(cls):
        hint = hints[f.name]
        if get_origin(hint) in (Union, types.UnionType):  # X | None
            hint = next(arg for arg in get_args(hint) if arg is not type(None))
        if hint in _TYPED_READERS:
            readers[f.name] = _TYPED_READERS[hint]
        elif isinstance(hint, type) and issubclass(hint, Enum):
            readers[f.name] = hint
        else:
            readers[f.name] = _as_stored
    return readers


def _as_stored(value: Any) -> Any:
    return value


def _upgraded(
    cls: type[SessionEvent], payload: dict[str, Any], values: dict[str, Any]
) -> dict[str, Any]:
    """Forms older releases stored: a failed profile's summary was kept beside its error, and
    a profile's text inside its summary."""
    if cls is ProfileDone:
        stored = payload.get("summary")
        if payload.get("error") is not None:
            values["summary"] = None
        if not payload.get("text") and isinstance(stored, dict):
            values["text"] = str(stored.get("text", ""))
    return values
