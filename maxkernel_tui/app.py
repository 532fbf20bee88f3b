"""The Textual app: screens, theme and global bindings. Thin; never imports jax."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from maxkernel_tui.config import Settings, cache_dir, load_settings
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.screens.task_picker import TaskPickerScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.themes import DEFAULT_THEME, THEMES


class MaxKernelApp(App[None]):
    TITLE = "maxkernel-tui"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True)]

    def __init__(self, tasks_dir: Path | None = None, cache: Path | None = None, task: Task | None = None,
                 settings: Settings | None = None) -> None:
        super().__init__()
        self._tasks_dir = tasks_dir
        self._cache = cache if cache is not None else cache_dir()
        self._initial_task = task
        self._settings = settings if settings is not None else load_settings()
        self._harness: Harness | None = None

    def on_mount(self) -> None:
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME  # the terminal's own palette: readable over SSH in any colours
        if self._initial_task is not None:
            self.open_workbench(self._initial_task)
        else:
            self.push_screen(TaskPickerScreen(self._tasks_dir, self._cache))

    def open_workbench(self, task: Task) -> None:
        provider = self._settings.provider + (" (offline)" if self._settings.provider == "builtin" else "")
        workdir = self._settings.data_dir / "workbench" / task.task_id
        self.push_screen(WorkbenchScreen(task, workdir, self._cache, self.harness,
                                         target=self._settings.tpu_target, provider=provider,
                                         budget_cap=_budget_cap(self._settings)))

    def harness(self) -> Harness:
        """The evaluation harness, started on first use: its worker processes would otherwise
        compete with the first frame for the CPU."""
        if self._harness is None:
            self._harness = Harness()
        return self._harness

    def on_unmount(self) -> None:
        if self._harness is not None:
            self._harness.close()


def _budget_cap(settings: Settings) -> str:
    caps = [f"{settings.budget_tokens:,} tok" if settings.budget_tokens else "",
            f"${settings.budget_dollars:.2f}" if settings.budget_dollars else ""]
    return " + ".join(c for c in caps if c) or "no cap"
