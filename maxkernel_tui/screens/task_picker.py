"""Task picker: the benchmark tasks, their shapes and XLA cost, and the reference source."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, Input, Static, TextArea

from maxkernel_tui.config import Settings, cache_dir, load_settings
from maxkernel_tui.kernels.catalog import cached_description, describe_tasks
from maxkernel_tui.kernels.description import TaskDescription
from maxkernel_tui.kernels.listing import format_task
from maxkernel_tui.kernels.loader import builtin_task_dirs, load_tasks
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.screens.editors import highlighted
from maxkernel_tui.screens.messages import TaskChosen
from maxkernel_tui.screens.plain import plain
from maxkernel_tui.screens.task_import import TaskImportScreen
from maxkernel_tui.screens.worker_errors import ShowsWorkerErrors
from maxkernel_tui.services.sessions import list_summaries
from maxkernel_tui.services.tasks import resolve_folder
from maxkernel_tui.visible import visible

TASK_COLUMN = 30  # characters of a task's id in the list


def _fitted(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


FOLDER_PROMPT = (
    "task folder to open (MaxKernel's kernel_task.yaml and reference.py, or JAXBench's "
    "baseline.py); enter opens it, escape closes"
)


class TaskDescribed(Message):
    """A worker finished describing one task (shapes, cost)."""

    def __init__(self, task_id: str, description: TaskDescription) -> None:
        super().__init__()
        self.task_id = task_id
        self.description = description


SETTLE_S = 0.4  # how long the cursor rests on a task before that task is described
ALL_DESCRIBED = "all tasks described"


class TaskPickerScreen(ShowsWorkerErrors, Screen[None]):
    CSS_PATH = "task_picker.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "describe", "Describe tasks (shapes, TPU cost)"),
        Binding("n", "import_task", "Import a task"),
        Binding("o", "open_folder", "Open a task folder"),
        Binding("s", "app.open_sessions", "Sessions"),
        Binding("c", "app.open_settings", "Settings"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(
        self,
        tasks_dir: Path | None = None,
        cache: Path | None = None,
        store_path: Path | None = None,
        imports_dir: Path | None = None,
        settings: Callable[[], Settings] = load_settings,
    ) -> None:
        """`store_path`: the session store, for the count of recent sessions in the header;
        `imports_dir`: where `n` writes imported tasks unless told otherwise; `settings`: the
        app's settings now (`n` ports CUDA and Triton files with their provider)."""
        super().__init__()
        self._settings = settings
        self._imports_dir = imports_dir if imports_dir is not None else Path.cwd() / "tasks"
        self._store_path = store_path
        self._cache = cache if cache is not None else cache_dir()
        self._tasks: list[Task] = []
        self._errors: list[TaskError] = []
        for root in (tasks_dir,) if tasks_dir is not None else builtin_task_dirs():
            found, problems = load_tasks(root, self._cache)  # the training group after the 50
            self._tasks += found
            self._errors += problems
        self._by_id = {t.task_id: t for t in self._tasks}
        self._descriptions: dict[str, TaskDescription] = {}
        self._shown: str | None = None
        self._settle: Timer | None = None  # describes the task the cursor rests on
        # Set when the screen goes away: describing workers still running are killed.
        self._leaving = threading.Event()

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield DataTable(id="tasks", cursor_type="row", zebra_stripes=True)
            with Vertical(id="detail"):
                yield Static(id="summary", markup=False)
                yield highlighted("", "python", code=True, read_only=True, id="source")
        yield Input(placeholder=FOLDER_PROMPT, id="folder")
        yield Static(id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        training = sum(1 for t in self._tasks if t.gradients)
        group = f" ({training} training: forward and backward judged)" if training else ""
        self.sub_title = f"{len(self._tasks)} tasks{group}{self._sessions_hint()}"
        table = self.query_one("#tasks", DataTable)
        # The task column holds TASK_COLUMN characters (a longer id ends in "…"; the detail
        # shows it whole), so that the category and GFLOP beside it are never cut off.
        table.add_column("task", width=TASK_COLUMN)
        table.add_columns("category", "GFLOP (est.)")
        for task in self._tasks:
            description = cached_description(task, self._cache)
            if description is not None:
                self._descriptions[task.task_id] = description
            table.add_row(*(plain(cell) for cell in self._row(task)), key=task.task_id)
        known = len(self._descriptions)
        errors = "".join(f"\n{e}" for e in self._errors)
        self._status(
            f"{known}/{len(self._tasks)} tasks described (cached); "
            f"the one under the cursor is described by itself, d describes the rest{errors}"
        )
        table.focus()

    def _sessions_hint(self) -> str:
        summaries = list_summaries(self._store_path) if self._store_path is not None else []
        if not summaries:
            return ""
        latest = summaries[0].session
        count = f"{len(summaries)} session{'s' if len(summaries) > 1 else ''}"
        return f" · {count}, latest {latest.task_id} {latest.status} (s)"

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show(self._by_id[event.row_key.value])
            # Only once the cursor rests: arrowing through the list starts no worker for the
            # tasks passed over.
            if self._settle is not None:
                self._settle.stop()
            self._settle = self.set_timer(SETTLE_S, self._describe_shown)

    def on_unmount(self) -> None:
        self._leaving.set()

    def _describe_shown(self) -> None:
        task = self._by_id.get(self._shown or "")
        if task is not None and task.task_id not in self._descriptions:
            self._describe_one(task)

    @work(thread=True, group="describe-one", exit_on_error=False)
    def _describe_one(self, task: Task) -> None:
        describe_tasks(
            [task], self._cache, workers=1, on_progress=self._post_described, stop=self._leaving
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a task opens it in the workbench."""
        if event.row_key.value is not None:
            self.post_message(TaskChosen(self._by_id[event.row_key.value]))

    def action_describe(self) -> None:
        self._status(
            "describing tasks in worker processes (shapes via eval_shape, AOT TPU compile)…"
        )
        self._describe_all()

    def action_import_task(self) -> None:
        """The import form; the new task opens in the workbench."""
        self.app.push_screen(TaskImportScreen(self._imports_dir, self._settings), self._imported)

    def action_open_folder(self) -> None:
        """A line for a task folder's path; enter opens it in the workbench, escape leaves it."""
        field = self.query_one("#folder", Input)
        field.display = True
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        typed = event.value.strip()
        if not typed:
            return
        try:
            task = resolve_folder(typed)
        except TaskError as error:
            self._status(str(error))  # the line stays, with what was typed, to correct it
            return
        self._close_folder_line()
        self.post_message(TaskChosen(task))

    def key_escape(self) -> None:
        self._close_folder_line()

    def _close_folder_line(self) -> None:
        field = self.query_one("#folder", Input)
        field.display = False
        field.value = ""
        self.query_one("#tasks", DataTable).focus()

    def _imported(self, task: Task | None) -> None:
        if task is not None:
            self.post_message(TaskChosen(task))

    @work(thread=True, exclusive=True, group="describe", exit_on_error=False)
    def _describe_all(self) -> None:
        describe_tasks(
            self._tasks, self._cache, on_progress=self._post_described, stop=self._leaving
        )
        if not self._leaving.is_set():
            self.app.call_from_thread(self._status, ALL_DESCRIBED)

    def _post_described(self, task_id: str, description: TaskDescription) -> None:
        self.post_message(TaskDescribed(task_id, description))

    def on_task_described(self, message: TaskDescribed) -> None:
        self._descriptions[message.task_id] = message.description
        table = self.query_one("#tasks", DataTable)
        task = self._by_id[message.task_id]
        for column, value in zip(table.columns, self._row(task)):
            table.update_cell(message.task_id, column, value)
        # The describe-all worker and the one for the task under the cursor answer in any
        # order: the status says "all" once every task has a description, whoever came last.
        every = all(t.task_id in self._descriptions for t in self._tasks)
        self._status(ALL_DESCRIBED if every else f"described {message.task_id}")
        if self._shown == task.task_id:
            self._show(task)

    def _row(self, task: Task) -> tuple[str, str, str]:
        """id, category, and the reference's XLA-estimated GFLOP with the TPU it was compiled
        for."""
        description = self._descriptions.get(task.task_id)
        cost = description.cost if description is not None else None
        if description is not None and not description.cacheable:
            flops = "error"
        elif cost is not None and cost.flops is not None:
            flops = f"{cost.flops / 1e9:,.1f} {cost.target}"
        else:
            flops = "…"
        return _fitted(task.task_id, TASK_COLUMN), task.category, flops

    def _show(self, task: Task) -> None:
        self._shown = task.task_id
        description = self._descriptions.get(task.task_id)
        if description is None:
            heading = (
                f"{task.task_id}  [{task.category}]  {task.operation}\n"
                "(describing it in the background…; d describes every task)"
            )
        else:
            heading = format_task(task, description)
        summary = f"{heading}\n\n{task.description}"
        self.query_one("#summary", Static).update(visible(summary))
        self.query_one("#source", TextArea).load_text(
            visible(task.reference_path.read_text(encoding="utf-8"))
        )

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(visible(text))
