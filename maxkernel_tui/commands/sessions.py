"""`maxkernel-tui sessions`: list the sessions in the store. No jax here."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from maxkernel_tui.config import add_settings_flags, settings_from_args
from maxkernel_tui.services.sessions import SESSION_HEADER, list_summaries, session_cells
from maxkernel_tui.store import SessionSummary


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "sessions",
        help="list the sessions in the store",
        description="List the sessions in the session store, most recent first: id, task, mode, "
        "status, kernel versions, the best kernel's verdict, tokens and cost, last update.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_settings_flags(parser, ("data_dir",))
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    path = settings_from_args(args).store_path
    summaries = list_summaries(path)
    if args.json:
        print(
            json.dumps(
                {"store": str(path), "sessions": [session_record(s) for s in summaries]}, indent=1
            )
        )
    elif not summaries:
        print(f"no sessions yet (store: {path})")
    else:
        print(format_sessions(summaries))
        print(f"store: {path}")
    return 0


def iso_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def session_record(summary: SessionSummary) -> dict[str, Any]:
    s = summary.session
    return {
        "id": s.id,
        "task_id": s.task_id,
        "mode": s.mode,
        "status": s.status,
        "title": s.title,
        "kernel_versions": summary.kernel_versions,
        "best_version": summary.best_version,
        "best_verdict": summary.best_verdict,
        "best_rule": None if summary.best is None else summary.best.rule.name.lower(),
        "best_score": None if summary.best is None else summary.best.score,
        "best_score_kind": None if summary.best is None else summary.best.score_kind or None,
        # the other speedup over XLA, labelled, beside the one the score is
        "best_score_also": None if summary.best is None else summary.best.score_also or None,
        "tokens": summary.tokens,
        "cost": round(summary.cost, 6),
        "created": iso_time(s.created),
        "updated": iso_time(s.updated),
    }


def format_sessions(summaries: list[SessionSummary]) -> str:
    rows = [SESSION_HEADER, *(session_cells(s) for s in summaries)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(SESSION_HEADER))]
    numeric = {4, 6, 7}
    return "\n".join(
        "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    )
