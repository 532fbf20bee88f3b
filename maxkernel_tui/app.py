"""The Textual app: screens, theme and global bindings. Thin; never imports jax."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from maxkernel_tui.screens.task_picker import TaskPickerScreen


class MaxKernelApp(App[None]):
    TITLE = "maxkernel-tui"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True)]

    def __init__(self, tasks_dir: Path | None = None, cache: Path | None = None) -> None:
        super().__init__()
        self._tasks_dir = tasks_dir
        self._cache = cache

    def on_mount(self) -> None:
        self.theme = "ansi-dark"  # the terminal's own palette: readable over SSH
        self.push_screen(TaskPickerScreen(self._tasks_dir, self._cache))
