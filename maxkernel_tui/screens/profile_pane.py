"""The workbench's profile pane: it profiles the engineer's kernel (from a thread: the analysis
runs in worker processes) and shows a profile's estimates per TPU generation in a table, with
the roofline bar, the timing's origin and the profiler's warnings under it. No jax here."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from maxkernel_tui.kernels.perf.calibration import CALIBRATION_FILE_NAME
from maxkernel_tui.kernels.perf.profile import ProfileError, profile_kernel
from maxkernel_tui.kernels.perf.summary import ProfileSummary, roofline_bar
from maxkernel_tui.kernels.task import Task

COLUMNS = ("TPU", "VMEM", "HBM", "bound", "est. time", "roofline", "est. speedup")


class ProfileFinished(Message):
    """The profile is done (`summary`) or failed (`error`): the pane shows it, then the screen
    hears of it."""

    def __init__(self, summary: ProfileSummary | None, error: str | None) -> None:
        super().__init__()
        self.summary = summary
        self.error = error


class ProfilePane(Vertical):
    def compose(self) -> ComposeResult:
        yield DataTable(id="profile", cursor_type="none")
        yield Static("roofline: not profiled yet (ctrl+o)", id="roofline", markup=False)

    def on_mount(self) -> None:
        self.border_title = "Profile (estimated)"
        self.query_one(DataTable).add_columns(*COLUMNS)

    def show(self, summary: ProfileSummary) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for row in summary.table_rows():
            table.add_row(*row)
        self.query_one("#roofline", Static).update(roofline_text(summary))

    @work(thread=True, exclusive=True, group="profile")
    def profile(self, kernel: Path, task: Task, cache: Path) -> None:
        """Profile the kernel file in a thread (traces and calibration under `cache`)."""
        try:
            summary = profile_kernel(
                kernel,
                task,
                trace_root=cache / "traces",
                calibration_file=cache / CALIBRATION_FILE_NAME,
            )
        except ProfileError as error:
            self.post_message(ProfileFinished(None, str(error)))
            return
        self.post_message(ProfileFinished(summary, None))

    def on_profile_finished(self, message: ProfileFinished) -> None:
        if message.summary is None:
            self.show_error(message.error or "")
        else:
            self.show(message.summary)

    def show_error(self, error: str) -> None:
        self.query_one("#roofline", Static).update(f"profile failed: {error}")


def roofline_text(summary: ProfileSummary) -> str:
    """The first estimate's roofline bar, where the timing comes from, and each warning once."""
    first = summary.estimates[0] if summary.estimates else None
    bar = roofline_bar(first.roofline_share if first else None)
    trace = summary.trace
    timing = f"trace: {trace.kind}" if trace and trace.measured else "timing: not measured (no TPU)"
    warnings = dict.fromkeys(w for ws in summary.warnings.values() for w in ws)
    return f"{first.target if first else ''} {bar}\n{timing}" + "".join(
        f"\n⚠ {w}" for w in warnings
    )
