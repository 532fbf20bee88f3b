"""The workbench's tests pane: it runs the engineer's evaluations (the harness, from a thread: the
kernels run in worker processes) and shows the checks as they finish and each verdict, the
agents' too, in a log that keeps the most recent lines. No jax here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Log

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.report import Check, EvalReport, format_check
from maxkernel_tui.kernels.task import Task

LOG_LINES = 2000  # the tests log keeps the most recent lines only
INTRO = (
    "ctrl+e evaluates the source: static rules, trace, TPU lowering "
    "and compile, numerics in TPU interpret mode, held-out shapes"
)


class CheckFinished(Message):
    """One check of the running evaluation is done (for the pane only)."""

    bubble = False

    def __init__(self, check: Check) -> None:
        super().__init__()
        self.check = check


class EvaluationFinished(Message):
    """The evaluation is done: the pane shows its verdict, then the screen hears of it."""

    def __init__(self, report: EvalReport) -> None:
        super().__init__()
        self.report = report


class TestsPane(Vertical):
    __test__ = False  # not a pytest test class, whatever its name says

    def compose(self) -> ComposeResult:
        yield Log(id="tests", max_lines=LOG_LINES)

    def on_mount(self) -> None:
        self.border_title = "Tests"
        self.write(INTRO)

    @property
    def lines(self) -> Sequence[str]:
        return self.query_one(Log).lines

    def write(self, line: str) -> None:
        self.query_one(Log).write_line(line)

    def begin(self, kernel: str, task_id: str, target: str) -> None:
        self.write(f"── evaluating {kernel} against {task_id} on {target}")

    def show_check(self, check: Check) -> None:
        self.write(format_check(check))

    def show_report(self, report: EvalReport) -> None:
        """What the verdict rests on, then the verdict: where it was earned, or why not."""
        for line in report.evidence:
            self.write(f"  evidence: {line}")
        self.write(report.verdict_line)

    @work(thread=True, exclusive=True, group="evaluate")
    def evaluate(
        self, harness: Callable[[], Harness], kernel: Path, task: Task, target: str
    ) -> None:
        """Evaluate the kernel file against the task in a thread; EvaluationFinished when done."""

        def on_check(check: Check) -> None:
            self.post_message(CheckFinished(check))

        report = harness().evaluate(kernel, task, EvalOptions(target=target), on_check=on_check)
        self.post_message(EvaluationFinished(report))

    def on_check_finished(self, message: CheckFinished) -> None:
        self.show_check(message.check)

    def on_evaluation_finished(self, message: EvaluationFinished) -> None:
        self.show_report(message.report)

    def show_verdict(self, report: EvalReport) -> None:
        """An agent's evaluation: its verdict and where it was earned, or its first failure."""
        self.write(report.verdict_line)
