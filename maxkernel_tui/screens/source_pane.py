"""The workbench's source pane: the kernel being written, in a code editor, saved to the
workbench's kernel file (only the engineer's save writes it here); its title names the file,
the kernel version shown and whether the editor holds changes not saved yet. While a proposal
waits the editor is read-only, so that the proposal's single-key answers never type into the
kernel. No jax here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import TextArea

from maxkernel_tui.screens.editors import highlighted
from maxkernel_tui.screens.pane_messages import SourceMessage

UNSAVED = "● unsaved"  # the title's marker while the editor differs from the kernel file
HELD = "read-only while a proposal waits (e edits it)"


class SourcePane(Vertical):
    version: reactive[int] = reactive(0, init=False)  # the kernel version shown; 0: none yet
    unsaved: reactive[bool] = reactive(False, init=False)  # the editor differs from the file
    held: reactive[bool] = reactive(False, init=False)  # read-only: a proposal waits

    def __init__(self, kernel_path: Path, initial: str, **kwargs: Any) -> None:
        """`initial`: the source when the kernel file does not exist yet (the starter, which
        counts as saved: it is what the file gets on the first save)."""
        super().__init__(**kwargs)
        self.kernel_path = kernel_path
        self._saved = kernel_path.read_text(encoding="utf-8") if kernel_path.is_file() else initial

    def compose(self) -> ComposeResult:
        # tab moves the focus between panes (the footer's keys work from any pane)
        yield highlighted(self._saved, "python", code=True, id="source", tab_behavior="focus")

    def on_mount(self) -> None:
        self._title()

    def watch_version(self) -> None:
        self._title()

    def watch_unsaved(self) -> None:
        self._title()

    def watch_held(self, held: bool) -> None:
        self.editor.read_only = held
        self._title()

    def _title(self) -> None:
        parts = [f"Source  {self.kernel_path.name}"]
        if self.version:
            parts.append(f"v{self.version}")
        if self.unsaved:
            parts.append(UNSAVED)
        if self.held:
            parts.append(HELD)
        self.border_title = "  ".join(parts)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area.id == "source":
            self.unsaved = event.text_area.text != self._saved

    @property
    def editor(self) -> TextArea:
        return self.query_one("#source", TextArea)

    @property
    def text(self) -> str:
        return self.editor.text

    def load(self, source: str) -> None:
        """Put `source` in the editor, not saved (the engineer's edit of a proposal)."""
        self.held = False
        self.editor.load_text(source)
        self.unsaved = source != self._saved

    def on_source_message(self, message: SourceMessage) -> None:
        if message.versions:
            self.show_version(*message.versions[-1])

    def show_version(self, number: int, source: str) -> None:
        """A kernel version becomes the source; the kernel file holds it already (written
        through services/kernel_file.py, which keeps what it replaced)."""
        self.editor.load_text(source)
        self.version = number
        self._saved = source
        self.unsaved = False

    def save(self) -> str:
        """The engineer's own save: write the editor's source to the kernel file; the source."""
        source = self.text
        self.kernel_path.parent.mkdir(parents=True, exist_ok=True)
        self.kernel_path.write_text(source, encoding="utf-8")
        self._saved = source
        self.unsaved = False
        return source
