"""The agents' pane: what the sub-agents do and say (streamed), the proposal waiting for a
decision with its diff, and a one-line input for a rejection reason or a message."""

from __future__ import annotations

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Input, Log, Static

from maxkernel_tui.agents.orchestration import diffs
from maxkernel_tui.agents.orchestration.gates import Proposal

ACTIVITY_LINES = 3000  # the activity log keeps the most recent lines only
KEYS = "a approve · e edit (ctrl+s submits) · r reject · f2 hand off to Auto · esc stop"


class ProposalView(VerticalScroll, can_focus=True):
    """The pending proposal: a one-line header and its diff against what it would replace.
    Focusable, so that single-key decisions never reach the code editor."""

    def compose(self) -> ComposeResult:
        yield Static(id="proposal-header", markup=False)
        yield Static(id="proposal-diff")

    def show(self, proposal: Proposal) -> None:
        self.query_one("#proposal-header", Static).update(
            f"{proposal.role} proposes a {proposal.subject} ({proposal.summary})  —  {KEYS}"
        )
        text = (
            diffs.unified(proposal.previous, proposal.content)
            if proposal.previous
            else proposal.content
        )
        lexer = (
            "diff"
            if proposal.previous
            else ("python" if proposal.subject == "kernel" else "markdown")
        )
        self.query_one("#proposal-diff", Static).update(
            Syntax(text, lexer, theme="ansi_dark", word_wrap=True)
        )
        self.scroll_home(animate=False)


class AgentPane(Horizontal):
    purpose = ""  # what the open input line is for: "reject" or "message"

    def compose(self) -> ComposeResult:
        yield Log(id="activity", max_lines=ACTIVITY_LINES)
        yield ProposalView(id="proposal")
        yield Input(id="agent-input")

    def on_mount(self) -> None:
        self.query_one("#proposal").display = False
        self.query_one("#agent-input").display = False

    def show_proposal(self, proposal: Proposal) -> None:
        view = self.query_one(ProposalView)
        view.show(proposal)
        view.display = True
        self.add_class("-pending")
        view.focus()

    def hide_proposal(self) -> None:
        self.query_one(ProposalView).display = False
        self.remove_class("-pending")

    def ask(self, placeholder: str, purpose: str) -> None:
        """Open the input line; the screen reads `purpose` when the engineer presses enter."""
        field = self.query_one("#agent-input", Input)
        field.placeholder, field.value = placeholder, ""
        self.purpose = purpose
        field.display = True
        field.focus()

    def close_input(self) -> None:
        self.query_one("#agent-input", Input).display = False
