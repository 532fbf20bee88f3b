"""The workbench's plan pane: the task and the agreed plan as Markdown, an editor for the
engineer's own version, and the plans the agents proposed until they are decided. No jax here."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ContentSwitcher, Markdown, TextArea

from maxkernel_tui.agents.orchestration.gates import EDIT, REJECT, Action
from maxkernel_tui.screens.editors import highlighted
from maxkernel_tui.screens.pane_messages import PlanMessage
from maxkernel_tui.visible import visible

SHOWN, EDITOR = "plan", "plan-editor"  # the switch's two children


class PlanPane(Vertical):
    def __init__(self, intro: str, **kwargs: Any) -> None:
        """`intro`: what the pane shows before there is a plan (the task and how to start)."""
        super().__init__(**kwargs)
        self._intro = intro
        self.text = ""  # the agreed plan, "" before there is one
        self._proposed: dict[str, str] = {}  # proposed plans by step, until decided

    def compose(self) -> ComposeResult:
        # the editor is made on the first edit: its Markdown grammar costs the first frame 40 ms
        with ContentSwitcher(initial=SHOWN, id="plan-switch"):
            yield Markdown(self._intro, id=SHOWN)

    def on_mount(self) -> None:
        self.border_title = "Plan"

    @property
    def editing(self) -> bool:
        return self.query_one(ContentSwitcher).current == EDITOR

    def show(self, text: str) -> None:
        self.text = text
        self.query_one(f"#{SHOWN}", Markdown).update(visible(text))

    def on_plan_message(self, message: PlanMessage) -> None:
        for step, plan in message.proposed:
            self.propose(step, plan)
        for step, action, content in message.decided:
            self.decided(step, action, content)

    def propose(self, step: str, content: str) -> None:
        self._proposed[step] = content

    def decided(self, step: str, action: Action, content: str | None) -> None:
        """A decision on a step's proposal: an approved or edited plan becomes the plan."""
        if step in self._proposed and action != REJECT:
            self.show(content if action == EDIT and content else self._proposed[step])

    def edit(self, text: str) -> None:
        """Open the editor on `text`."""
        switch = self.query_one(ContentSwitcher)
        editors = self.query(f"#{EDITOR}").results(TextArea)
        editor = next(editors, None)
        if editor is None:
            editor = highlighted(text, "markdown", id=EDITOR)
            switch.mount(editor)
        else:
            editor.load_text(text)
        switch.current = EDITOR
        editor.focus()

    def close_editor(self) -> str:
        """Back to the shown plan; the editor's text."""
        self.query_one(ContentSwitcher).current = SHOWN
        return self.query_one(f"#{EDITOR}", TextArea).text
