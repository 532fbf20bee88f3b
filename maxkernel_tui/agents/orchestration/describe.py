"""One line per event for people: the headless CLI prints these, the TUI's agent pane shows them."""

from __future__ import annotations

from typing import Any

from maxkernel_tui.agents.orchestration.events import (
    BudgetReport,
    DecisionMade,
    EarlierVerdict,
    ErrorRaised,
    EvaluationDone,
    Intervention,
    LlmAnswer,
    ModeChanged,
    Note,
    ProfileDone,
    ProposalMade,
    ProposalRepeated,
    SessionEnded,
    SessionEvent,
    SessionStarted,
    StepStarted,
    ToolAnswered,
    ToolsCalled,
    UsageReport,
    VersionCreated,
)
from maxkernel_tui.agents.orchestration.gates import Decider


def _score(value: float | None, kind: str, also: str = "") -> str:
    """`1.02 (estimated speedup vs XLA@3-pass (tolerance) on v5e; 0.35x XLA@1-pass (as
    written) (est., v5e))`: a score, its kind and the other speedup beside it."""
    beside = f"; {also}" if also else ""
    return "no score" if value is None else f"{value:.3g} ({kind}{beside})"


def _call_words(name: str, arguments: dict[str, Any]) -> str:
    """`lower(source: 38 lines, config='bench')`: long strings by their size, not their text."""
    shown = []
    for argument, value in arguments.items():
        if isinstance(value, str) and "\n" in value:
            shown.append(f"{argument}: {value.count(chr(10)) + 1} lines")
        else:
            shown.append(f"{argument}={value!r}"[:60])
    return f"{name}({', '.join(shown)})"


def _version(number: int | None, version_id: int) -> str:
    """`v3`, the number users see everywhere; events stored before they kept it name the id."""
    return f"v{number}" if number else f"version id {version_id}"


def describe(event: SessionEvent) -> str | None:
    """None for events that are not worth a line of their own (streamed text)."""
    match event:
        case SessionStarted():
            own = [f"{role} {r['model']}" for role, r in event.roles.items() if r.get("model")]
            models = "; ".join([event.model, *own])
            return (
                f"session on {event.task_id}: {event.mode}, TPU {event.target}, "
                f"provider {event.provider} ({models})"
            )
        case StepStarted():
            return f"▸ {event.title}"
        case LlmAnswer():
            cost = "" if event.cost_usd is None else f", ${event.cost_usd:.4f}"
            return f"  {event.role} answered ({event.model}, {event.tokens} tokens{cost})"
        case ToolsCalled():
            called = ", ".join(_call_words(c["name"], c["arguments"]) for c in event.calls)
            return f"  {event.role} calls {called} ({event.model}, {event.tokens} tokens)"
        case ToolAnswered():
            first = (event.text.strip().splitlines() or [""])[0][:100]
            mark = "→" if event.ok else "✗"
            return f"    {event.name} {mark} {first}  [{event.seconds:.1f}s]"
        case UsageReport():
            return None
        case ProposalMade() if event.nothing_new:
            return (
                f"  {event.role} has nothing else to offer ({event.summary}); the session waits "
                f"for the engineer: keep the current {event.subject}, edit it, or say what to try"
            )
        case ProposalMade():
            return f"  {event.role} proposes a {event.subject} ({event.summary})"
        case DecisionMade() if event.by == Decider.UNCHANGED:
            return "  unchanged: the same as before, kept without asking"
        case DecisionMade():
            why = f": {event.feedback}" if event.feedback else ""
            by = f" (by {event.by})" if event.by else ""
            return f"  decision: {event.action}{why}{by}"
        case VersionCreated():
            return f"  kernel v{event.number} ({event.origin})"
        case EvaluationDone():
            return f"  evaluation of {_version(event.version_number, event.version_id)}: " + (
                f"{event.verdict.upper()}" + (f" — {event.failure}" if event.failure else "")
            )
        case EarlierVerdict():
            return (
                f"  v{event.version_number} again: not evaluated; its earlier verdict "
                f"(at {event.judged_at}): {event.verdict.upper()}"
                + (f" — {event.failure}" if event.failure else "")
            )
        case ProposalRepeated() if event.nothing_new:
            return (
                f"  {event.role} has nothing new: it proposed a kernel already turned down "
                f"({event.rejection}) again"
            )
        case ProposalRepeated():
            return (
                f"  {event.role} proposed a kernel already turned down ({event.rejection}): "
                "not shown, asked for another"
            )
        case ProfileDone():
            if event.error:
                return f"  profile failed: {event.error}"
            return f"  profile: {_score(event.score, event.score_kind, event.score_also)}"
        case Note():
            return "\n".join(
                f"  {event.role}: {line}" for line in event.text.strip().splitlines()[:12]
            )
        case Intervention():
            return f"  engineer's {event.subject} taken at {event.step}"
        case ModeChanged():
            return f"  mode → {event.mode.upper()}"
        case BudgetReport():
            return f"  budget: {event.message}"
        case ErrorRaised():
            return f"  error: {event.message}"
        case SessionEnded():
            best = (
                "no accepted kernel"
                if event.best_version_id is None
                else (
                    f"best kernel {_version(event.best_version_number, event.best_version_id)}, "
                    f"{_score(event.best_score, event.score_kind, event.score_also)}"
                )
            )
            return f"session ended: {event.reason}; {best}"
    return None
