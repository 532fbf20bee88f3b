"""A line per search-node change, for the headless CLI and the TUI's log; a judged node's
verdict evidence on the lines below it, as `eval` prints it (shared with the search screen)."""

from __future__ import annotations

from collections.abc import Sequence

from maxkernel_tui.agents.orchestration.events import (
    SearchNodeChanged,
    SessionEvent,
    Steered,
    StrategySkipped,
)


def describe_node(event: SearchNodeChanged) -> str:
    also = f"; {event.score_also}" if event.score_also else ""
    score = "" if event.score is None else f" {event.score:.3g}× ({event.score_kind}{also})"
    parents = ", ".join(f"#{p.removeprefix('n')}" for p in event.parents)
    origin = f" ← {parents}" if parents else ""
    detail = f" — {event.detail}" if event.detail else ""
    line = f"◆ node #{event.number} {event.status}{score} {event.strategy}{origin}{detail}"
    return "\n".join(
        [line, *(f"    {more}" for more in verdict_evidence(event.scope, event.evidence))]
    )


def verdict_evidence(scope: str, evidence: Sequence[str]) -> list[str]:
    """What a node's verdict rests on, a line each: the shapes an acceptance was earned at
    (`verified at production shapes` or `checked at small shapes only`), then the evidence
    (seeds, held-out, edge cases, production tiles sampled, device numerics). Nothing for a node
    that was not judged."""
    earned = [f"accepted, {scope}"] if scope else []
    return earned + [f"evidence: {line}" for line in evidence]


def describe_skipped(event: StrategySkipped) -> str:
    return f"◇ strategy {event.strategy} skipped on #{event.node.removeprefix('n')}: {event.reason}"


def describe_search(event: SessionEvent) -> str | None:
    """The line of a search's own events; None for the others (the session's describe has them)."""
    if isinstance(event, SearchNodeChanged):
        return describe_node(event)
    if isinstance(event, StrategySkipped):
        return describe_skipped(event)
    if isinstance(event, Steered):
        return describe_steered(event)
    return None


def describe_steered(event: Steered) -> str:
    when = "" if event.round is None else f" (its node in round {event.round})"
    return f"➤ steering taken up: {event.words}{when}"
