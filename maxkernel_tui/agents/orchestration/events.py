"""Typed events of a session. Each is persisted by the store before anyone sees it.

Every event has a `ref`, unique within its session and the same on every run of the same step:
on resume the engine replays its steps and an event whose ref is already stored is not written
or delivered again. The store's `kind` column is the class's `kind`; `decode` turns a stored
row back into its class.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from maxkernel_tui.kernels.evaluation.report import EvalReport
from maxkernel_tui.kernels.perf.summary import ProfileSummary


@dataclass(frozen=True)
class SessionEvent:
    kind: ClassVar[str] = ""
    ref: str  # not "key": the store redacts fields named like credentials

    def payload(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SessionStarted(SessionEvent):
    """What the session is about and how it runs: enough to resume it in another process."""

    kind: ClassVar[str] = "session_started"
    task_dir: str
    task_id: str
    mode: str
    target: str
    provider: str
    model: str
    limits: dict[str, Any] = field(default_factory=dict)
    # each role's own model, tools and tool calls per step (agents.tools.assignment.RolePlan)
    roles: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepStarted(SessionEvent):
    kind: ClassVar[str] = "step_started"
    step: str
    role: str
    iteration: int
    title: str


@dataclass(frozen=True)
class TextChunk(SessionEvent):
    """Streamed model text, coalesced (a few per second, not one per token)."""

    kind: ClassVar[str] = "text"
    step: str
    role: str
    text: str


@dataclass(frozen=True)
class LlmAnswer(SessionEvent):
    """A complete model answer: on resume it is reused instead of paying for the call again.
    `tokens` and `cost_usd` are the step's whole conversation's, its turns that called tools
    included."""

    kind: ClassVar[str] = "llm_answer"
    step: str
    role: str
    text: str
    model: str
    tokens: int
    cost_usd: float | None


@dataclass(frozen=True)
class ToolsCalled(SessionEvent):
    """A model turn that called tools instead of answering: on resume it is replayed, and the
    model is not asked that turn again."""

    kind: ClassVar[str] = "tools_called"
    step: str
    role: str
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

    kind: ClassVar[str] = "tool_result"
    step: str
    role: str
    call_id: str
    name: str
    arguments: dict[str, Any]
    ok: bool
    text: str
    seconds: float


@dataclass(frozen=True)
class UsageReport(SessionEvent):
    """One attempt of a call (failed ones cost too) and the session's totals after it."""

    kind: ClassVar[str] = "usage"
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
    kind: ClassVar[str] = "proposal"
    step: str
    role: str
    subject: str  # gates.Subject: plan or kernel
    content: str
    previous: str  # what it would replace ("" when nothing)
    summary: str
    reverts: str = ""  # what of the engineer's changes it undoes ("" when nothing)


@dataclass(frozen=True)
class DecisionMade(SessionEvent):
    kind: ClassVar[str] = "decision"
    step: str
    action: str  # gates.Action: approve | edit | reject | handoff
    content: str | None = None
    feedback: str | None = None
    mode: str | None = None
    by: str = ""  # the gate that decided: auto, interactive, scripted


@dataclass(frozen=True)
class VersionCreated(SessionEvent):
    kind: ClassVar[str] = "version"
    step: str
    version_id: int
    number: int
    origin: str  # implementer, debugger, autotuner, engineer


@dataclass(frozen=True)
class EvaluationDone(SessionEvent):
    kind: ClassVar[str] = "evaluation"
    step: str
    version_id: int
    verdict: str
    failure: str | None  # "check: detail" of the first failed check
    report: dict[str, Any]  # EvalReport.to_json()
    executor_node: str = "local"  # where it ran: this machine's pool, or a Ray node
    # what the verdict is keyed by (verdicts.py), hashed; not named "key": the store redacts
    # fields named like credentials. "" in events stored before kernels were judged once
    verdict_hash: str = ""
    version_number: int = 0  # the v-number a user sees; 0 in events stored before it was kept
    kernel_hash: str = ""  # fingerprint.kernel_hash of the kernel judged ("" in older events)

    def eval_report(self) -> EvalReport:
        return EvalReport.from_json(self.report)


@dataclass(frozen=True)
class EarlierVerdict(SessionEvent):
    """A step's kernel was judged before (same normalised source, task snapshot, configurations
    and target): its earlier verdict stands, nothing is evaluated and no version is added."""

    kind: ClassVar[str] = "earlier_verdict"
    step: str
    version_id: int  # the version that was judged, which becomes the current kernel again
    version_number: int
    verdict: str
    failure: str | None
    judged_at: str  # the step whose evaluation judged it
    report: dict[str, Any]  # that evaluation's EvalReport.to_json()

    def eval_report(self) -> EvalReport:
        return EvalReport.from_json(self.report)


@dataclass(frozen=True)
class ProposalRepeated(SessionEvent):
    """A role proposed a kernel already turned down: it is not shown at the gate, and the role is
    asked for another (`nothing_new`: it had none, and the step ends)."""

    kind: ClassVar[str] = "proposal_repeated"
    step: str
    role: str
    rejection: str  # verdicts.Rejection.words()
    nothing_new: bool = False


@dataclass(frozen=True)
class ProfileDone(SessionEvent):
    kind: ClassVar[str] = "profile"
    step: str
    version_id: int | None  # None for an estimate only (an autotune candidate)
    score: float | None  # the fitness the loop ranks by
    score_kind: str  # e.g. "estimated speedup vs XLA on v5e" or "measured speedup on TPU v5e"
    summary: dict[str, Any]  # ProfileSummary.to_json(); {} when the profile failed
    error: str | None = None
    text: str = ""  # the summary as the agents read it (ProfileSummary.to_text())

    def profile_summary(self) -> ProfileSummary | None:
        failed = self.error is not None or not self.summary
        return None if failed else ProfileSummary.from_json(self.summary)

    def profile_text(self) -> str:
        """The text; events stored before it had its own field kept it inside the summary."""
        return self.text or str(self.summary.get("text", ""))


@dataclass(frozen=True)
class Note(SessionEvent):
    """A sub-agent's text that informs later steps without a gate (diagnosis, autotune log,
    answer)."""

    kind: ClassVar[str] = "note"
    step: str
    role: str
    text: str


@dataclass(frozen=True)
class EdgeCasesChosen(SessionEvent):
    """The tester's edge-case configurations after validation: the accepted ones join every later
    evaluation (a resumed session takes them from here, without validating again)."""

    kind: ClassVar[str] = "edge_cases"
    step: str
    accepted: list[list[Any]]  # [name, params] pairs
    rejected: list[str]  # one reason per rejected proposal


@dataclass(frozen=True)
class Intervention(SessionEvent):
    """The engineer's edit of the source or plan, or a chat message, taken at a step boundary."""

    kind: ClassVar[str] = "intervention"
    step: str
    subject: str  # gates.Subject: kernel | plan | message | mode
    content: str


@dataclass(frozen=True)
class ModeChanged(SessionEvent):
    kind: ClassVar[str] = "mode"
    step: str
    mode: str  # rows.Mode: hitl | auto | graph


@dataclass(frozen=True)
class BudgetReport(SessionEvent):
    kind: ClassVar[str] = "budget"
    step: str
    message: str


@dataclass(frozen=True)
class ErrorRaised(SessionEvent):
    kind: ClassVar[str] = "error"
    step: str
    role: str
    message: str


@dataclass(frozen=True)
class SessionEnded(SessionEvent):
    kind: ClassVar[str] = "session_ended"
    reason: str
    best_version_id: int | None
    best_score: float | None
    score_kind: str
    best_version_number: int | None = None  # the v-number a user sees (absent in older events)


@dataclass(frozen=True)
class SearchNodeChanged(SessionEvent):
    """A graph-search node as it is now (created, running, judged, merged, pruned); the store's
    `search_nodes` row says the same."""

    kind: ClassVar[str] = "search_node"
    node: str  # the node's ref within the search, e.g. "n7"
    number: int  # the "#7" a user sees
    status: str  # graph.NodeStatus
    parents: list[str]
    strategy: str
    score: float | None = None
    score_kind: str = ""
    version_id: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class StrategySkipped(SessionEvent):
    """A search strategy the agent has no move for on a node's kernel: skipped before it cost a
    node or an evaluation."""

    kind: ClassVar[str] = "strategy_skipped"
    node: str  # the parent it would have grown from
    strategy: str
    reason: str


EVENT_TYPES: dict[str, type[SessionEvent]] = {
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
    )
}


def decode(kind: str, payload: dict[str, Any]) -> SessionEvent:
    """A stored event back as its class; unknown fields (from a newer release) are dropped."""
    cls = EVENT_TYPES[kind]
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in payload.items() if k in names})
