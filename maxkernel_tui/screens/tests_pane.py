"""The workbench's tests pane: the evaluation's checks as they finish, and each verdict, in a log
that keeps the most recent lines. No jax here."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log

from maxkernel_tui.kernels.evaluation.report import Check, EvalReport, format_check, format_report

LOG_LINES = 2000  # the tests log keeps the most recent lines only
INTRO = (
    "ctrl+e evaluates the source: static rules, trace, TPU lowering "
    "and compile, numerics in TPU interpret mode, held-out shapes"
)


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
        """The report's last line: its verdict and why."""
        self.write(format_report(report).splitlines()[-1])

    def show_verdict(self, verdict: str, failure: str | None) -> None:
        """An agent's evaluation: its verdict and first failure."""
        self.write(f"verdict: {verdict.upper()}" + (f": {failure}" if failure else ""))
