"""A kernel editor over the search screen: the engineer takes a node's kernel, changes it by
hand, and ctrl+s gives it back to the search as that node's child (judged like any other node).
Returns the edited source, or None when left with escape. Never imports jax."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from maxkernel_tui.screens.editors import highlighted


class HandEditScreen(ModalScreen[str | None]):
    CSS_PATH = "hand_edit.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save as a child node", priority=True),
        Binding("escape", "leave", "Leave without saving", priority=True),
    ]

    def __init__(self, title: str, source: str) -> None:
        super().__init__()
        self._title, self._source = title, source

    def compose(self) -> ComposeResult:
        with Vertical(id="hand-box"):
            yield highlighted(self._source, "python", code=True, id="hand-source")
            yield Static(
                "ctrl+s: the search judges this kernel as the node's child · escape: leave",
                id="hand-hint",
                markup=False,
            )

    def on_mount(self) -> None:
        self.query_one("#hand-box").border_title = self._title
        self.query_one("#hand-source", TextArea).focus()

    @property
    def text(self) -> str:
        return self.query_one("#hand-source", TextArea).text

    def action_save(self) -> None:
        changed = self.text if self.text.strip() != self._source.strip() else None
        self.dismiss(changed)

    def action_leave(self) -> None:
        self.dismiss(None)
