"""The sessions in the store, as the sessions listing, the sessions screen and resume see them:
open the store if there is one, list, resolve an id prefix, and one session's table cells.
No jax here."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from maxkernel_tui.services.tasks import task_label
from maxkernel_tui.store import BestKernel, BestRule, Session, SessionSummary, Store, StoreError


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
        return store.find_session(prefix) if prefix else latest_session(store)


def latest_session(store: Store) -> Session:
    """The most recently updated session; StoreError when the store holds none."""
    summaries = store.list_sessions()
    if not summaries:
        raise StoreError(f"no sessions yet in {store.path}")
    return summaries[0].session


def best_cell(best: BestKernel) -> str:
    """`v6 accepted (best score 1.42)`: the best kernel, its verdict and the rule that picked it."""
    verdict = best.evaluation.verdict if best.evaluation else "not evaluated"
    rule = {
        BestRule.BEST_SCORE: f"best score {best.score:.3g}" if best.score is not None else "",
        BestRule.LATEST_ACCEPTED: "latest accepted, none scored",
        BestRule.NOTHING_ACCEPTED: "latest, none accepted",
    }[best.rule]
    return f"v{best.version.number} {verdict} ({rule})"


def local_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


SESSION_HEADER = ("ID", "TASK", "MODE", "STATUS", "VERSIONS", "BEST", "TOKENS", "COST", "UPDATED")


def session_cells(summary: SessionSummary) -> tuple[str, ...]:
    """One session as the text cells of SESSION_HEADER (shared by this listing and the TUI)."""
    s = summary.session
    best = "-" if summary.best is None else best_cell(summary.best)
    return (
        s.id,
        task_label(s.task_id, s.task_dir),
        s.mode,
        s.status,
        str(summary.kernel_versions),
        best,
        f"{summary.tokens:,}",
        f"${summary.cost:.2f}",
        local_time(s.updated),
    )
