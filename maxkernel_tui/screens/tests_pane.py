"""The workbench's tests pane: the checks of every evaluation as they finish and each verdict,
the engineer's and the agents' alike (both arrive as `TestsMessage`s), in a log that wraps long
lines at the pane's edge and keeps the most recent ones. No jax here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical

from maxkernel_tui.kernels.report.checks import Check, EvalReport, format_check
from maxkernel_tui.screens.pane_messages import TestsMessage
from maxkernel_tui.screens.wrapping_log import WrappingLog

LOG_LINES = 2000  # the tests log keeps the most recent lines only
INTRO = (
    "ctrl+e evaluates the source: static rules, trace, TPU lowering "
    "and compile, numerics in TPU interpret mode, held-out shapes"
)


class TestsPane(Vertical):
    __test__ = False  # not a pytest test class, whatever its name says

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._log = WrappingLog(LOG_LINES, id="tests")  # written to before it is mounted

    def compose(self) -> ComposeResult:
        yield self._log

    def on_mount(self) -> None:
        self.border_title = "Tests"
        self.write(INTRO)

    @property
    def lines(self) -> Sequence[str]:
        """The lines written, each whole (the log shows them wrapped)."""
        return self._log.lines

    def write(self, line: str) -> None:
        self._log.write_line(line)

    def on_tests_message(self, message: TestsMessage) -> None:
        for item in message.items:
            if isinstance(item, Check):
                self.write(format_check(item))
            elif isinstance(item, EvalReport):
                self.show_report(item)
            else:
                self.write(item)

    def show_report(self, report: EvalReport) -> None:
        """What the verdict rests on, the verdict (where it was earned, or why not), then the
        seeds and where it ran."""
        for line in report.evidence:
            self.write(f"  evidence: {line}")
        self.write(report.verdict_line)
        seeds = ", ".join(map(str, report.seeds)) or "none"
        self.write(f"  {len(report.seeds)} seed(s) ({seeds}) on {report.executor_node}")
