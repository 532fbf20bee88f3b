"""What the screen tests share: readers of the workbench's status and activity for a failing
wait, and the kernels and model answers their fake agents give (the engine tests' own, from
tests/support/engine.py)."""

from __future__ import annotations

import os

from textual.app import App
from textual.widgets import Static, Tree

from maxkernel_tui.screens.agent_pane import AgentPane
from tests.support.engine import DIAGNOSIS, GOOD, kernel, plan, variant

__all__ = ["DIAGNOSIS", "GOOD", "kernel", "palette_offers", "plan", "status", "variant"]
__all__ += ["screenshot", "workbench_state"]


def status(app: App[object]) -> str:
    """The workbench's status line."""
    return str(app.screen.query_one("#status", Static).content)


def workbench_state(app: App[object]) -> str:
    """The status line and the last lines of activity: what a failed wait reports."""
    activity = "\n".join(app.screen.query_one(AgentPane).lines[-6:])
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


def tree_labels(screen: object) -> list[str]:
    """The search screen's node tree, depth first, as its labels read."""
    tree = screen.query_one("#nodes", Tree)  # type: ignore[attr-defined]
    found, todo = [], list(tree.root.children)
    while todo:
        item = todo.pop(0)
        found.append(str(item.label))
        todo = list(item.children) + todo
    return found


def screenshot(app: App[None], name: str) -> None:
    """Save the screen as SVG where MAXKERNEL_TUI_SCREENSHOTS names a folder (how the pictures
    in benchmarks/results/ were made); nothing otherwise."""
    folder = os.environ.get("MAXKERNEL_TUI_SCREENSHOTS")
    if folder:
        app.save_screenshot(name, folder)
