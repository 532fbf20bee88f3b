"""One line per search-node change, for the headless CLI and the TUI's log."""

from __future__ import annotations

from maxkernel_tui.agents.orchestration.events import (
    SearchNodeChanged,
    SessionEvent,
    StrategySkipped,
)


def describe_node(event: SearchNodeChanged) -> str:
    score = "" if event.score is None else f" {event.score:.3g}× ({event.score_kind})"
    parents = ", ".join(f"#{p.removeprefix('n')}" for p in event.parents)
    origin = f" ← {parents}" if parents else ""
    detail = f" — {event.detail}" if event.detail else ""
    return f"◆ node #{event.number} {event.status}{score} {event.strategy}{origin}{detail}"


def describe_skipped(event: StrategySkipped) -> str:
    return f"◇ strategy {event.strategy} skipped on #{event.node.removeprefix('n')}: {event.reason}"


def describe_search(event: SessionEvent) -> str | None:
    """The line of a search's own events; None for the others (the session's describe has them)."""
    if isinstance(event, SearchNodeChanged):
        return describe_node(event)
    if isinstance(event, StrategySkipped):
        return describe_skipped(event)
    return None
