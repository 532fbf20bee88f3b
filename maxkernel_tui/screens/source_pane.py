"""The workbench's source pane: the kernel being written, in a code editor, saved to the
workbench's kernel file; its title names the file and the kernel version shown. No jax here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import TextArea


class SourcePane(Vertical):
    version: reactive[int] = reactive(0, init=False)  # the kernel version shown; 0: none yet

    def __init__(self, kernel_path: Path, initial: str, **kwargs: Any) -> None:
        """`initial`: the source when the kernel file does not exist yet."""
        super().__init__(**kwargs)
        self.kernel_path = kernel_path
        self._initial = initial

    def compose(self) -> ComposeResult:
        source = (
            self.kernel_path.read_text(encoding="utf-8")
            if self.kernel_path.is_file()
            else self._initial
        )
        yield TextArea.code_editor(source, language="python", id="source")

    def on_mount(self) -> None:
        self.watch_version(self.version)

    def watch_version(self, number: int) -> None:
        self.border_title = f"Source  {self.kernel_path.name}" + (f"  v{number}" if number else "")

    @property
    def editor(self) -> TextArea:
        return self.query_one("#source", TextArea)

    @property
    def text(self) -> str:
        return self.editor.text

    def load(self, source: str) -> None:
        """Put `source` in the editor (the engineer's edit of a proposal)."""
        self.editor.load_text(source)

    def show_version(self, number: int, source: str) -> None:
        """A kernel version of the session becomes the source and the kernel file."""
        self.load(source)
        self.version = number
        self._write(source)

    def save(self) -> str:
        """Write the editor's source to the kernel file; the source."""
        source = self.text
        self._write(source)
        return source

    def _write(self, source: str) -> None:
        self.kernel_path.parent.mkdir(parents=True, exist_ok=True)
        self.kernel_path.write_text(source, encoding="utf-8")
