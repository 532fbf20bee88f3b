"""What the screen tests share: the kernels and model answers their fake agents give, and readers
of the workbench's status and activity for a failing wait.

The kernels and answers are the ones the engine and search tests script (the same files and
text), kept here so that no test module imports another."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Log, Static

from maxkernel_tui.agents.roles.tunables import set_tunables
from tests.support.paths import KERNELS

GOOD = (KERNELS / "agent" / "rmsnorm_tunable.py").read_text()
DIAGNOSIS = "Memory-bound at the estimated share of roofline.\nNext: larger row blocks.\n"


def plan(note: str = "") -> str:
    """A planner's answer: a plan for the RMSNorm task, with `note` in its first line."""
    return (
        f"Row blocks of BLOCK_ROWS rows with the full hidden dimension. {note}\n\n"
        "## Tiling\nRows in blocks of 256, hidden 8192 whole.\n\n"
        "## Grid\n(rows // 256,), parallel.\n\n"
        "## Memory\nx block in VMEM, double-buffered: 2 x 256 x 8192 x 2 B.\n\n"
        "## Expected bound\nMemory: one read and one write of x.\n"
    )


def kernel(source: str) -> str:
    """An implementer's answer carrying `source`."""
    return f"Here is the kernel.\n```python\n{source}```\n"


def variant(rows: int) -> str:
    """The good kernel with another row block: another kernel, another estimate."""
    return kernel(set_tunables(GOOD, {"BLOCK_ROWS": rows}))


def status(app: App[object]) -> str:
    """The workbench's status line."""
    return str(app.screen.query_one("#status", Static).content)


def workbench_state(app: App[object]) -> str:
    """The status line and the last lines of activity: what a failed wait reports."""
    activity = "\n".join(app.screen.query_one("#activity", Log).lines[-6:])
    return f"status: {status(app)}\n{activity}"


def palette_offers(app: App[object], words: str) -> bool:
    """The command palette is open and lists a command whose prompt has `words` in it."""
    from textual.command import CommandList, CommandPalette

    if not isinstance(app.screen, CommandPalette):
        return False
    results = app.screen.query_one(CommandList)
    return any(
        words.lower() in str(results.get_option_at_index(i).prompt).lower()
        for i in range(results.option_count)
    )
