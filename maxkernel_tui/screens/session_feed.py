"""The one route from a workbench session's events to the panes: each batch of what the session
did is sorted into one typed message per pane (pane_messages.py), in order. A stored event's
dict is converted here, once, into the type the pane shows (`EvalReport`, `ProfileSummary`).
No jax; it loads the agents' events, so the workbench imports it when a session first
delivers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from maxkernel_tui.agents.orchestration import events as ev
from maxkernel_tui.agents.orchestration.describe import describe
from maxkernel_tui.agents.orchestration.gates import Proposal, Subject
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.screens.pane_messages import (
    AgentsItem,
    PlanMessage,
    ProfileItem,
    StatusMessage,
    Streamed,
    TestsItem,
)


@dataclass
class SortedBatch:
    """One batch, by pane. `versions`: kernel version ids (the source is read from the store)."""

    plan: PlanMessage = field(default_factory=PlanMessage)
    versions: list[int] = field(default_factory=list)
    tests: list[TestsItem] = field(default_factory=list)
    profile: list[ProfileItem] = field(default_factory=list)
    agents: list[AgentsItem] = field(default_factory=list)
    status: StatusMessage = field(default_factory=StatusMessage)


def sort_batch(updates: Sequence[ev.SessionEvent | Proposal], ended: bool) -> SortedBatch:
    """Each update to the pane (or panes) that shows it, in order."""
    out = SortedBatch()
    out.status.ended = ended
    for update in updates:
        if isinstance(update, Proposal):
            if update.subject == Subject.PLAN:
                out.plan.proposed.append((update.step, update.content))
            out.agents.append(update)
        elif isinstance(update, ev.TextChunk):
            out.agents.append(Streamed(update.text))
        else:
            if (line := describe(update)) is not None:
                out.agents.append(line)
            _sort_event(update, out)
    return out


def _sort_event(event: ev.SessionEvent, out: SortedBatch) -> None:
    match event:
        case ev.StepStarted():
            out.status.step, out.status.role = event.step, event.role
        case ev.ProposalMade() if event.subject == Subject.PLAN:
            out.plan.proposed.append((event.step, event.content))
        case ev.DecisionMade():
            out.plan.decided.append((event.step, event.action, event.content))
        case ev.VersionCreated():
            out.versions.append(event.version_id)
        case ev.Note() if event.role == Role.TESTER:
            out.tests.append(event.text)
        case ev.EvaluationDone():
            out.tests.append(event.report)
        case ev.EarlierVerdict():
            out.versions.append(event.version_id)  # it becomes the current kernel again
            out.tests.append(f"v{event.version_number} again: its earlier verdict stands")
            out.tests.append(event.report)
        case ev.ProfileDone() if event.version_id is not None:
            summary = event.summary
            out.profile.append(summary if summary is not None else event.error or "no profile")
        case ev.UsageReport():
            out.status.usage = (event.session_tokens, event.session_cost_usd)
        case ev.ModeChanged():
            out.status.mode = event.mode
        case ev.SessionEnded():
            out.status.ended = out.status.session_ended = True
