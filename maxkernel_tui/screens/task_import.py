"""The import form the task picker opens with `n`: a file, a function, its input shapes and a
folder; the same flow as `maxkernel-tui tasks import`, with the same importers: JAX functions and
PyTorch modules offline, CUDA and Triton files (and modules the translator refuses) through the
porter agent with the configured provider, approved in `PortReviewScreen` when no comparison with
PyTorch can decide. No jax in this process: the import runs in a Textual thread worker, the
reference is validated (and compared with PyTorch) in worker processes (kernels/importers/).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static
from textual.worker import Worker, WorkerState

from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.importers import ImportOptions
from maxkernel_tui.kernels.importers.service import ImportedTask, import_task
from maxkernel_tui.kernels.task import Task, TaskImportError
from maxkernel_tui.screens.port_review import approve_in_app
from maxkernel_tui.visible import visible

_FIELDS = (
    ("file", "File: JAX, a PyTorch module, CUDA (.cu) or Triton", "path/to/model.py"),
    ("function", "Function (blank: the only one)", "rms_norm"),
    ("args", "Input shapes (blank: the file's get_inputs())", "bf16[8,4096,8192] f32[8192]"),
    ("static", "Static arguments, space-separated literals", "1e-5"),
    ("out", "Task folder to write", ""),
)


class TaskImportScreen(ModalScreen[Task | None]):
    """Dismissed with the new task (the picker opens it in the workbench), or None."""

    CSS_PATH = "task_import.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default_root: Path, settings: Callable[[], Settings]) -> None:
        """`settings`: the app's settings now (the porter uses their provider)."""
        super().__init__()
        self._default_root = default_root
        self._settings = settings

    def compose(self) -> ComposeResult:
        with Vertical(id="form"):
            yield Static(
                "Import a function, a PyTorch module or a GPU kernel as a task", id="title"
            )
            for name, label, placeholder in _FIELDS:
                yield Label(label)
                yield Input(placeholder=placeholder or str(self._default_root / "NAME"), id=name)
            yield Button("Import", id="import", variant="primary")
            yield Static(id="message", markup=False)

    def _value(self, name: str) -> str:
        return self.query_one(f"#{name}", Input).value.strip()

    def options(self) -> ImportOptions:
        return ImportOptions(
            function=self._value("function") or None,
            args=self._value("args") or None,
            static=tuple(self._value("static").split()),
        )

    def out_folder(self, file: Path) -> Path:
        return (
            Path(self._value("out")).expanduser()
            if self._value("out")
            else (self._default_root / file.stem)
        )

    @on(Button.Pressed, "#import")
    @on(Input.Submitted)
    def start_import(self) -> None:
        file = Path(self._value("file")).expanduser()
        if not self._value("file"):
            self._say("say which file to import")
            return
        self._say("translating, then validating the reference in a worker process…")
        self._import(file, self.out_folder(file), self.options())

    @work(thread=True, exclusive=True, group="import", exit_on_error=False)
    def _import(self, file: Path, out: Path, options: ImportOptions) -> ImportedTask:
        # The porter's model client loads here, in the worker, not at the app's start-up.
        from maxkernel_tui.agents.porting import task_importers

        importers = task_importers(self._settings(), approve_in_app(self.app))
        return import_task(file, out, options, importers=importers)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "import":
            return
        if event.state == WorkerState.SUCCESS and isinstance(event.worker.result, ImportedTask):
            self.dismiss(event.worker.result.task)
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            text = str(error) if isinstance(error, TaskImportError) else repr(error)
            self._say(f"error: {text}")

    def _say(self, text: str) -> None:
        self.query_one("#message", Static).update(visible(text))

    def action_cancel(self) -> None:
        self.dismiss(None)
