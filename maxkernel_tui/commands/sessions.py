"""`maxkernel-tui sessions`: list the sessions in the store. No jax here."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from maxkernel_tui.config import add_settings_flags, settings_from_args
from maxkernel_tui.store import Session, SessionSummary, Store, StoreError


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


def existing_store(path: Path) -> Store | None:
    """The store at `path`, or None when there is none yet (nothing is created)."""
    return Store(path) if path.is_file() else None


def list_summaries(path: Path) -> list[SessionSummary]:
    """Every session in the store at `path`, most recent first; [] when there is no store yet."""
    store = existing_store(path)
    if store is None:
        return []
    with store:
        return store.list_sessions()


def resolve_session(prefix: str, path: Path) -> Session:
    """The session an id or unique prefix names; with "" the most recently updated one.
    StoreError (saying why) when there is no store, no session, or no such session."""
    store = existing_store(path)
    if store is None:
        raise StoreError(f"no sessions yet (no session store at {path})")
    with store:
        if prefix:
            return store.find_session(prefix)
        summaries = store.list_sessions()
    if not summaries:
        raise StoreError(f"no sessions yet in {path}")
    return summaries[0].session


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


def local_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


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
        "tokens": summary.tokens,
        "cost": round(summary.cost, 6),
        "created": iso_time(s.created),
        "updated": iso_time(s.updated),
    }


SESSION_HEADER = ("ID", "TASK", "MODE", "STATUS", "VERSIONS", "BEST", "TOKENS", "COST", "UPDATED")


def session_cells(summary: SessionSummary) -> tuple[str, ...]:
    """One session as the text cells of SESSION_HEADER (shared by this listing and the TUI)."""
    s = summary.session
    best = (
        "-"
        if summary.best_version is None
        else f"v{summary.best_version} {summary.best_verdict or 'not evaluated'}"
    )
    return (
        s.id,
        s.task_id,
        s.mode,
        s.status,
        str(summary.kernel_versions),
        best,
        f"{summary.tokens:,}",
        f"${summary.cost:.2f}",
        local_time(s.updated),
    )


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
