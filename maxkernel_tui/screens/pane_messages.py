"""The workbench panes' messages: each pane's share of what its session did, one typed Message
per pane, posted to that pane, which handles it itself (session_feed.py sorts a session's events
into them; the engineer's own evaluations and profiles post the same ones). No jax, and nothing
of the agents' engine: the workbench's first frame does not load it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from textual.message import Message

from maxkernel_tui.agents.orchestration.gates import Action, Proposal
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.kernels.report.checks import Check, EvalReport
from maxkernel_tui.store.kinds import Mode

if TYPE_CHECKING:  # the profiler's summary loads with the first profile, not the first frame
    from maxkernel_tui.kernels.perf.summary import ProfileSummary


@dataclass(frozen=True)
class Streamed:
    """Model text as it streams, written without a line break of its own."""

    text: str


TestsItem = Check | EvalReport | str  # a finished check, a verdict, or a tester's note
ProfileItem: TypeAlias = "ProfileSummary | str"  # a profile, or why it failed
AgentsItem = str | Streamed | Proposal  # a line of activity, streamed text, a waiting proposal


@dataclass
class PlanMessage(Message, bubble=False):
    proposed: list[tuple[str, str]] = field(default_factory=list)  # (step, plan)
    decided: list[tuple[str, Action, str | None]] = field(default_factory=list)


@dataclass
class SourceMessage(Message, bubble=False):
    versions: list[tuple[int, str]]  # (number, source), oldest first: the last is shown


@dataclass
class TestsMessage(Message, bubble=False):
    __test__ = False  # not a pytest test class, whatever its name says
    items: list[TestsItem]


@dataclass
class ProfileMessage(Message, bubble=False):
    items: list[ProfileItem]


@dataclass
class AgentsMessage(Message, bubble=False):
    items: list[AgentsItem]


@dataclass
class StatusMessage(Message, bubble=False):
    """For the screen: the step that started last, the session's usage and mode, and whether
    the session's loop has ended. None: unchanged."""

    step: str | None = None
    role: Role | None = None  # whose step it is
    usage: tuple[int, float] | None = None
    mode: Mode | None = None
    ended: bool = False
    session_ended: bool = False  # the session ended (SessionEnded): its best kernel is shown
