"""The workbench: plan, editable source, tests and profile of one task, on one screen.

Evaluation and profiling run in thread workers that call the harness, which runs the kernel in
worker processes: this process never imports jax. Check results arrive one by one as messages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Log, Markdown, Static, TextArea

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.report import Check, EvalReport, format_check, format_report
from maxkernel_tui.kernels.perf.profile import ProfileError, profile_kernel
from maxkernel_tui.kernels.perf.summary import ProfileSummary, roofline_bar
from maxkernel_tui.kernels.starter import starter_source
from maxkernel_tui.kernels.task import Task

LOG_LINES = 2000  # the tests log keeps the most recent lines only


class CheckFinished(Message):
    def __init__(self, check: Check) -> None:
        super().__init__()
        self.check = check


class EvaluationFinished(Message):
    def __init__(self, report: EvalReport) -> None:
        super().__init__()
        self.report = report


class ProfileFinished(Message):
    def __init__(self, summary: ProfileSummary | None, error: str | None) -> None:
        super().__init__()
        self.summary = summary
        self.error = error


class WorkbenchScreen(Screen[None]):
    CSS_PATH = "workbench.tcss"
    # priority: the code editor would otherwise take these keys (ctrl+e is its end-of-line)
    BINDINGS = [
        Binding("ctrl+e", "evaluate", "Evaluate", priority=True),
        Binding("ctrl+o", "profile", "Profile", priority=True),
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("ctrl+q", "app.quit", "Quit", priority=True),
    ]

    def __init__(self, task: Task, workdir: Path, cache: Path, harness: Callable[[], Harness],
                 target: str = "v5e", provider: str = "builtin (offline)", budget_cap: str = "no cap") -> None:
        super().__init__()
        self.kernel_task = task
        self._kernel_path = workdir / "kernel.py"
        self._cache = cache
        self._harness = harness
        self._target = target
        self._provider = provider
        self._budget_cap = budget_cap
        self._step = "idle"

    def compose(self) -> ComposeResult:
        yield Static(id="status", markup=False)
        with Grid(id="panes"):
            with Vertical(id="plan-pane", classes="pane"):
                yield Markdown(self._plan_text(), id="plan")
            with Vertical(id="source-pane", classes="pane"):
                yield TextArea.code_editor(self._initial_source(), language="python", id="source")
            with Vertical(id="tests-pane", classes="pane"):
                yield Log(id="tests", max_lines=LOG_LINES)
            with Vertical(id="profile-pane", classes="pane"):
                yield DataTable(id="profile", cursor_type="none")
                yield Static("roofline: not profiled yet (ctrl+o)", id="roofline", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        for pane, title in (("#plan-pane", "Plan"), ("#source-pane", f"Source  {self._kernel_path.name}"),
                            ("#tests-pane", "Tests"), ("#profile-pane", "Profile (estimated)")):
            self.query_one(pane).border_title = title
        self.query_one("#profile", DataTable).add_columns("TPU", "VMEM", "HBM", "bound", "est. time",
                                                          "roofline", "est. speedup")
        self.query_one("#tests", Log).write_line("ctrl+e evaluates the source: static rules, trace, TPU lowering "
                                                 "and compile, numerics in TPU interpret mode, held-out shapes")
        self._show_status()
        self.query_one("#source", TextArea).focus()
        self.call_after_refresh(self._harness)  # warm the evaluation workers once the screen is drawn

    def action_save(self) -> None:
        self._save_source()
        self.notify(f"saved {self._kernel_path}")

    def action_evaluate(self) -> None:
        self._save_source()
        log = self.query_one("#tests", Log)
        log.write_line(f"── evaluating {self._kernel_path.name} against {self.kernel_task.task_id} on {self._target}")
        self._set_step("evaluating")
        self._evaluate()

    def action_profile(self) -> None:
        self._save_source()
        self._set_step("profiling")
        self._profile()

    @work(thread=True, exclusive=True, group="evaluate")
    def _evaluate(self) -> None:
        report = self._harness().evaluate(self._kernel_path, self.kernel_task, EvalOptions(target=self._target),
                                        on_check=lambda check: self.post_message(CheckFinished(check)))
        self.post_message(EvaluationFinished(report))

    @work(thread=True, exclusive=True, group="profile")
    def _profile(self) -> None:
        try:
            summary = profile_kernel(self._kernel_path, self.kernel_task, trace_root=self._cache / "traces",
                                     calibration_file=self._cache / "calibration.json")
        except ProfileError as error:
            self.post_message(ProfileFinished(None, str(error)))
            return
        self.post_message(ProfileFinished(summary, None))

    def on_check_finished(self, message: CheckFinished) -> None:
        self.query_one("#tests", Log).write_line(format_check(message.check))

    def on_evaluation_finished(self, message: EvaluationFinished) -> None:
        self.query_one("#tests", Log).write_line(format_report(message.report).splitlines()[-1])
        self._set_step("idle")

    def on_profile_finished(self, message: ProfileFinished) -> None:
        self._set_step("idle")
        if message.summary is None:
            self.query_one("#roofline", Static).update(f"profile failed: {message.error}")
            return
        table = self.query_one("#profile", DataTable)
        table.clear()
        for row in message.summary.table_rows():
            table.add_row(*row)
        first = message.summary.estimates[0] if message.summary.estimates else None
        bar = roofline_bar(first.roofline_share if first else None)
        warnings = [w for ws in message.summary.warnings.values() for w in ws]
        timing = "timing: not measured (no TPU)" if not message.summary.trace or not message.summary.trace[
            "kind"].startswith("measured") else f"trace: {message.summary.trace['kind']}"
        self.query_one("#roofline", Static).update(
            f"{first.target if first else ''} {bar}\n{timing}" + "".join(f"\n⚠ {w}" for w in dict.fromkeys(warnings)))

    def _initial_source(self) -> str:
        if self._kernel_path.is_file():
            return self._kernel_path.read_text(encoding="utf-8")
        return starter_source(self.kernel_task)

    def _save_source(self) -> None:
        self._kernel_path.parent.mkdir(parents=True, exist_ok=True)
        self._kernel_path.write_text(self.query_one("#source", TextArea).text, encoding="utf-8")

    def _plan_text(self) -> str:
        task = self.kernel_task
        configs = ", ".join(task.agent_visible_configs())
        return (f"### {task.task_id}\n\n{task.description}\n\n*category* {task.category} · *configurations* "
                f"{configs} · *tolerance* atol {task.tolerance(task.configs[0]).atol:g}\n\n"
                "No plan yet: write one with the agents, or edit the source directly.")

    def _set_step(self, step: str) -> None:
        self._step = step
        self._show_status()

    def _show_status(self) -> None:
        self.query_one("#status", Static).update(
            f" maxkernel-tui ─ {self.kernel_task.task_id} ─ HITL ─ {self._step} ─ {self._target} (AOT) ─ "
            f"{self._provider} ─ 0 tok $0.00 / {self._budget_cap}")  # no LLM call runs here yet
