"""The workbench's profile pane: a profile's estimates per TPU generation in a table, with the
roofline bar, the timing's origin and the profiler's warnings under it, or why the profile
failed; the engineer's and the agents' profiles alike (`ProfileMessage`). No jax here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from maxkernel_tui.screens.pane_messages import ProfileMessage
from maxkernel_tui.screens.plain import plain
from maxkernel_tui.visible import visible

if TYPE_CHECKING:  # the profiler's summary loads with the first profile, not the first frame
    from maxkernel_tui.kernels.perf.summary import ProfileSummary

COLUMNS = ("TPU", "VMEM", "HBM", "bound", "est. time", "roofline", "est. vs XLA")


class ProfilePane(Vertical):
    def compose(self) -> ComposeResult:
        yield DataTable(id="profile", cursor_type="none")
        yield Static("roofline: not profiled yet (ctrl+o)", id="roofline", markup=False)

    def on_mount(self) -> None:
        self.border_title = "Profile (estimated)"
        self.query_one(DataTable).add_columns(*COLUMNS)

    def on_profile_message(self, message: ProfileMessage) -> None:
        for item in message.items:
            if isinstance(item, str):
                self.show_error(item)
            else:
                self.show(item)

    def show(self, summary: ProfileSummary) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for row in summary.table_rows():
            table.add_row(*(plain(cell) for cell in row))
        self.query_one("#roofline", Static).update(visible(roofline_text(summary)))

    def show_error(self, error: str) -> None:
        self.query_one("#roofline", Static).update(f"profile failed: {visible(error)}")


def roofline_text(summary: ProfileSummary) -> str:
    """The first estimate's roofline bar, where the timing comes from, and each warning once."""
    from maxkernel_tui.kernels.perf.summary import roofline_bar

    first = summary.estimates[0] if summary.estimates else None
    bar = roofline_bar(first.roofline_share if first else None)
    trace = summary.trace
    timing = f"trace: {trace.kind}" if trace and trace.measured else "timing: not measured (no TPU)"
    warnings = dict.fromkeys(w for ws in summary.warnings.values() for w in ws)
    return f"{first.target if first else ''} {bar}\n{timing}" + "".join(
        f"\n⚠ {w}" for w in warnings
    )
