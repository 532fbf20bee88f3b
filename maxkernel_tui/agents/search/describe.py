"""One line per search-node change, for the headless CLI and the TUI's log."""

from __future__ import annotations

from maxkernel_tui.agents.orchestration.events import SearchNodeChanged


def describe_node(event: SearchNodeChanged) -> str:
    score = "" if event.score is None else f" {event.score:.3g}× ({event.score_kind})"
    parents = ", ".join(f"#{p.removeprefix('n')}" for p in event.parents)
    origin = f" ← {parents}" if parents else ""
    detail = f" — {event.detail}" if event.detail else ""
    return f"◆ node #{event.number} {event.status}{score} {event.strategy}{origin}{detail}"
