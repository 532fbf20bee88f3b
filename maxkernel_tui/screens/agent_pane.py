"""The agents' pane: what the sub-agents do and say (streamed), the proposal waiting for a
decision with its diff, and a one-line input for a rejection reason or a message. No jax here."""

from __future__ import annotations

from typing import Any, Literal

from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer
from textual.message import Message
from textual.widgets import Input, Static

from maxkernel_tui.agents.orchestration import diffs
from maxkernel_tui.agents.orchestration.gates import Proposal, Subject
from maxkernel_tui.screens.pane_messages import AgentsMessage, Streamed
from maxkernel_tui.screens.wrapping_log import WrappingLog
from maxkernel_tui.visible import visible

ACTIVITY_LINES = 3000  # the activity log keeps the most recent lines only
TITLE = "Agents  (F5 run · F2 HITL⇄Auto · esc stop · ctrl+t or ctrl+g message)"
KEYS = "a approve · e edit (ctrl+s submits) · r reject · f2 hand off to Auto · esc stop"
KERNEL_KEYS = KEYS.replace("r reject ·", "r reject · c evidence card ·")  # a kernel has one
NOTHING_KEYS = (
    "a (or f5) go on with the current one · e edit it (ctrl+s submits) · r or ctrl+t say what "
    "to try · esc stop"
)


class ProposalView(ScrollableContainer, can_focus=True):
    """The pending proposal: a one-line header and its diff against what it would replace, its
    lines whole (scrolled sideways, never wrapped into a column). Focusable, so that single-key
    decisions never reach the code editor."""

    def compose(self) -> ComposeResult:
        yield Static(id="proposal-header", markup=False)
        yield Static(id="proposal-draft", markup=False)
        yield Static(id="proposal-diff")

    def show(self, proposal: Proposal) -> None:
        from rich.syntax import Syntax  # with the first proposal, not for the first frame

        header = (
            visible(f"{proposal.role} has nothing else to offer: {proposal.summary}")
            + f"  —  {NOTHING_KEYS}"
            if proposal.nothing_new
            else visible(f"{proposal.role} proposes a {proposal.subject} ({proposal.summary})")
            + f"  —  {KERNEL_KEYS if proposal.subject == Subject.KERNEL else KEYS}"
        )
        self.query_one("#proposal-header", Static).update(header)
        self.query_one("#proposal-draft", Static).display = False  # until it is judged ahead
        text = (
            diffs.unified(proposal.previous, proposal.content)
            if proposal.previous
            else proposal.content
        )
        lexer = (
            "diff"
            if proposal.previous
            else ("python" if proposal.subject == Subject.KERNEL else "markdown")
        )
        self.query_one("#proposal-diff", Static).update(
            Syntax(visible(text), lexer, theme="ansi_dark")
        )
        self.scroll_home(animate=False)


Purpose = Literal["reject", "message"]  # what the open input line is for


class AgentPane(Horizontal):
    class ProposalWaiting(Message):
        """A proposal is shown (or no longer): the screen makes room for it beside the panes."""

        def __init__(self, waiting: bool) -> None:
            super().__init__()
            self.waiting = waiting

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.purpose: Purpose | None = None
        self.proposal: Proposal | None = None  # the proposal shown, waiting for a decision
        self._activity = WrappingLog(ACTIVITY_LINES, id="activity")  # written to before mounted

    def compose(self) -> ComposeResult:
        yield self._activity
        yield ProposalView(id="proposal")
        yield Input(id="agent-input")

    def on_mount(self) -> None:
        self.border_title = TITLE
        self.query_one(ProposalView).display = False
        self.query_one(Input).display = False

    def on_agents_message(self, message: AgentsMessage) -> None:
        for item in message.items:
            if isinstance(item, Streamed):
                self.stream(item.text)
            elif isinstance(item, Proposal):
                self.show_proposal(item)
            else:
                self.log_line(item)

    @property
    def lines(self) -> list[str]:
        """The activity log's lines, each whole (shown wrapped at the pane's edge)."""
        return self._activity.lines

    @property
    def open_text(self) -> str:
        """Streamed model text whose line has not ended yet."""
        return self._activity.open_text

    def log_line(self, line: str) -> None:
        """One line of activity, on a line of its own even after streamed text."""
        self._activity.write_line(line)

    def stream(self, text: str) -> None:
        """Streamed model text, as it comes."""
        self._activity.stream(text)

    def show_proposal(self, proposal: Proposal) -> None:
        self.proposal = proposal
        view = self.query_one(ProposalView)
        view.show(proposal)
        view.display = True
        self.add_class("-pending")
        self.post_message(self.ProposalWaiting(True))
        view.focus()

    def show_draft(self, words: str) -> None:
        """What the proposal's verdict is, judged ahead of the decision (draft-ahead)."""
        draft = self.query_one("#proposal-draft", Static)
        draft.update(visible(words))
        draft.display = True

    def hide_proposal(self) -> None:
        self.proposal = None
        self.query_one(ProposalView).display = False
        self.remove_class("-pending")
        self.post_message(self.ProposalWaiting(False))

    @property
    def asking(self) -> bool:
        """The input line is open."""
        return bool(self.query_one(Input).display)

    def ask(self, placeholder: str, purpose: Purpose) -> None:
        """Open the input line; the screen reads `purpose` when the engineer presses enter."""
        field = self.query_one(Input)
        field.placeholder, field.value = placeholder, ""
        self.purpose = purpose
        field.display = True
        field.focus()

    def close_input(self) -> None:
        self.query_one(Input).display = False
