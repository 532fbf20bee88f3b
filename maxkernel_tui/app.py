"""The Textual app: screens, theme and global bindings, and the one place that handles what the
screens ask of it (screens/messages.py: open a task, resume, promote a kernel, saved settings).
Thin; never imports jax."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen

from maxkernel_tui.config import (
    ENV,
    FILE,
    FLAG,
    SPEC_BY_NAME,
    Settings,
    Source,
    cache_dir,
    load_settings,
)
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.screens.messages import (
    KernelPromoted,
    ResumeRequested,
    SettingsSaved,
    TaskChosen,
)
from maxkernel_tui.screens.palette import MaxKernelCommands
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.screens.worker_errors import ShowsWorkerErrors
from maxkernel_tui.services.tasks import resolve_task, workbench_name
from maxkernel_tui.store import StoreError
from maxkernel_tui.themes import DEFAULT_THEME, THEMES

if TYPE_CHECKING:
    from maxkernel_tui.agents.llm.provider import Provider
    from maxkernel_tui.kernels.service.service import Harness
    from maxkernel_tui.services.kernel_file import Kept


class MaxKernelApp(ShowsWorkerErrors, App[None]):
    TITLE = "maxkernel-tui"
    # The first screens' sheets (they also name them) are read with the app's: a screen's sheet
    # read when it is pushed parses every sheet again, a tenth of a second before the first frame
    CSS_PATH: ClassVar[list[str | PurePath]] = [
        "screens/workbench.tcss",
        "screens/task_picker.tcss",
    ]
    COMMANDS = App.COMMANDS | {MaxKernelCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1", "help", "Help"),
        # not priority: in the code editor `?` is a character to type, and f1 still opens help
        Binding("question_mark", "help", "Help", show=False),
    ]

    def __init__(
        self,
        tasks_dir: Path | None = None,
        cache: Path | None = None,
        task: Task | None = None,
        settings: Settings | None = None,
        resume: str | None = None,
        agent_provider: Provider | None = None,
        harness: Harness | None = None,
    ) -> None:
        """`resume`: a session id (or unique prefix) to reopen in the workbench instead of the
        picker. `agent_provider`: the model behind the agents instead of the configured one,
        `harness`: the evaluation harness instead of one started on first use (tests)."""
        super().__init__()
        self._tasks_dir = tasks_dir
        self._cache = cache if cache is not None else cache_dir()
        self._initial_task = task
        self._resume = resume
        self._agent_provider = agent_provider
        self._settings = settings if settings is not None else load_settings()
        self._harness: Harness | None = harness
        # the theme before the first parse of the sheets: set when mounted, it parses them again
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = self._theme_name(self._settings.theme)

    @property
    def settings(self) -> Settings:
        return self._settings

    def get_default_screen(self) -> Screen[Any]:
        """The workbench itself when the app opens on a task: pushed over an empty first screen
        it was laid out and drawn twice before its first frame (a tenth of a second,
        benchmarks/first_frame.py)."""
        if self._initial_task is not None:
            return self._workbench(self._initial_task)
        return super().get_default_screen()

    def on_mount(self) -> None:
        if self._initial_task is not None:
            return  # the workbench is the first screen (get_default_screen)
        # the screens not shown first load when first shown: the first frame does not wait
        from maxkernel_tui.screens.task_picker import TaskPickerScreen

        self.push_screen(
            TaskPickerScreen(
                self._tasks_dir,
                self._cache,
                store_path=self._settings.store_path,
                imports_dir=self._settings.data_dir / "imported",
                settings=lambda: self._settings,
            )
        )
        if self._resume is not None:
            # over the picker: a failure leaves the picker and says why
            self.resume_session(self._resume)

    def _theme_name(self, wanted: str | None) -> str:
        """The configured theme when the app knows it; else the default (the terminal's own palette,
        readable over SSH in any colours), with a warning for a name it does not know."""
        if wanted is None:
            return DEFAULT_THEME
        if wanted not in self.available_themes:
            self.notify(
                f"unknown theme {wanted!r} in the settings; using {DEFAULT_THEME}",
                severity="warning",
            )
            return DEFAULT_THEME
        return wanted

    def theme_names(self) -> list[str]:
        """Our themes first, then Textual's built-ins."""
        ours = [t.name for t in THEMES]
        return ours + sorted(n for n in self.available_themes if n not in ours)

    def _workdir(self, task: Task) -> Path:
        return self._settings.data_dir / "workbench" / workbench_name(task)

    def open_workbench(
        self, task: Task, session_id: str | None = None, kept: Kept | None = None
    ) -> None:
        """`session_id`: a stored session whose events fill the panes and which F5 continues;
        `kept`: the engineer's kernel that the kernel file held before (f6 goes back to it)."""
        self.push_screen(self._workbench(task, session_id, kept))

    def _workbench(
        self, task: Task, session_id: str | None = None, kept: Kept | None = None
    ) -> WorkbenchScreen:
        provider = self._settings.provider + (
            " (offline)" if self._settings.provider == "builtin" else ""
        )
        return WorkbenchScreen(
            task,
            self._workdir(task),
            self.harness,
            self._settings,
            provider=provider,
            budget_cap=_budget_cap(self._settings),
            agent_provider=self._agent_provider,
            session_id=session_id,
            kept=kept,
        )

    def resume_session(self, prefix: str) -> bool:
        """Open the workbench on a session's task with the session's best kernel (the store's
        one rule: the best score among its accepted versions, else the latest accepted, else
        the latest version) as the source. The workbench reads its source from its kernel file,
        so that file gets the kernel; a kernel of yours already there is kept as a version."""
        from maxkernel_tui.services.sessions import existing_store, resolve_session

        try:
            session = resolve_session(prefix, self._settings.store_path)
            task = resolve_task(session.task_dir or session.task_id, self._tasks_dir)
            store = existing_store(self._settings.store_path)
            assert store is not None  # resolve_session found the session in it
            with store:
                best = store.best_kernel(session.id)
        except (StoreError, TaskError, OSError) as error:
            self.notify(str(error), title="cannot resume", severity="error", timeout=10)
            return False
        note = f"resumed session {session.id} ({session.mode}, {session.status})"
        kept = None
        if best is not None:
            kept = self._place_kernel(task, best.version.source, session.id, "resuming a session")
            note += f"; source: kernel {best.words()}"
        else:
            note += "; it has no kernel version yet"
        self.open_workbench(task, session.id, kept)
        self.notify(note + (f"; {kept.words()}" if kept else ""), title="sessions")
        return True

    # -- what the screens ask (screens/messages.py) -----------------------------------------------

    def on_task_chosen(self, message: TaskChosen) -> None:
        self.open_workbench(message.task)

    def on_resume_requested(self, message: ResumeRequested) -> None:
        self.resume_session(message.session_id)

    def on_kernel_promoted(self, message: KernelPromoted) -> None:
        """Open the workbench (HITL) on the promoted kernel."""
        note = f"{message.origin} promoted to the workbench"
        kept = self._place_kernel(
            message.task, message.source, message.session_id, "a search node was promoted"
        )
        self.open_workbench(message.task, kept=kept)
        self.notify(note + (f"; {kept.words()}" if kept else ""), title="search")

    def on_settings_saved(self, message: SettingsSaved) -> None:
        notes = self.apply_settings(message.changed)
        self.notify("\n".join([f"saved to {message.path}", *notes]), title="settings")

    def _place_kernel(self, task: Task, source: str, session_id: str, why: str) -> Kept | None:
        """Make `source` (a version of session `session_id`) the workbench's kernel file; a
        kernel of the engineer's already there is kept as a version first (what was kept)."""
        from maxkernel_tui.services.kernel_file import replace_kernel
        from maxkernel_tui.store.db import open_store

        store = open_store(self._settings.store_path)  # the process's writer, shared
        return replace_kernel(store, self._workdir(task) / "kernel.py", source, session_id, why)

    def action_open_sessions(self) -> None:
        from maxkernel_tui.screens.sessions import SessionsScreen

        if not isinstance(self.screen, SessionsScreen):
            self.push_screen(
                SessionsScreen(self._settings.store_path, self._settings.data_dir / "exports")
            )

    def action_open_settings(self) -> None:
        from maxkernel_tui.screens.settings import SettingsScreen

        if not isinstance(self.screen, SettingsScreen):
            self.push_screen(SettingsScreen(self._settings, self.theme_names()))

    def action_help(self) -> None:
        from maxkernel_tui.screens.help import HelpScreen, key_help  # not for the first frame

        screen = self.screen
        if not isinstance(screen, HelpScreen):
            self.push_screen(
                HelpScreen(type(screen).__name__.removesuffix("Screen"), key_help(self, screen))
            )

    def apply_settings(self, changed: Mapping[str, Any]) -> list[str]:
        """Take settings just saved to the config file. One that an environment variable or a flag
        sets keeps that value (it wins over the file, as at start-up); the notes say which."""
        updates: dict[str, Any] = {}
        notes = []
        sources = dict(self._settings.sources)
        for name, raw in changed.items():
            source = self._settings.source(name)
            if source.kind in (ENV, FLAG):
                notes.append(f"{name}: {source.where} still wins over the file")
                continue
            updates[name] = None if raw is None else SPEC_BY_NAME[name].parse(raw)
            if raw is None:
                sources.pop(name, None)
            else:
                sources[name] = Source(FILE, str(self._settings.config_file))
        self._settings = dataclasses.replace(self._settings, **updates, sources=sources)
        self.theme = self._theme_name(self._settings.theme)
        return notes

    def harness(self) -> Harness:
        """The evaluation harness, started on first use: its worker processes would otherwise
        compete with the first frame for the CPU."""
        if self._harness is None:
            from maxkernel_tui.kernels.service.service import Harness  # not before the frame

            self._harness = Harness()
        return self._harness

    def on_unmount(self) -> None:
        if self._harness is not None:
            self._harness.close()


def _budget_cap(settings: Settings) -> str:
    caps = [
        f"{settings.budget_tokens:,} tok" if settings.budget_tokens else "",
        f"${settings.budget_dollars:.2f}" if settings.budget_dollars else "",
    ]
    return " + ".join(c for c in caps if c) or "no cap"
