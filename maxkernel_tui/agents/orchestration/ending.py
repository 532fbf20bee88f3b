"""What a session ends on: its best accepted kernel by the store's one rule (Store.best_kernel),
with that kernel's own evaluation report and profile, or the plain fact that there is none. The
workbench shows it when Auto or Graph ends (never the last, maybe rejected, version), and a
hand-off to Graph seeds from it. Read from the store, so it holds for a session that ended in
another process too. No jax here."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.agents.orchestration.events import SessionEnded, decode
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.rows import BestKernel, KernelVersion


@dataclass(frozen=True)
class BestAtEnd:
    reason: str  # why the session ended
    best: BestKernel | None  # the best accepted kernel and the rule that picked it; None: none
    report: EvalReport | None  # its accepted evaluation
    profile: ProfileSummary | None  # its latest profile, if it was profiled

    @property
    def version(self) -> KernelVersion | None:
        return None if self.best is None else self.best.version

    def words(self) -> str:
        if self.best is None:
            return f"ended ({self.reason}) without an accepted kernel: the source is not one"
        return f"ended ({self.reason}); the workbench shows its best kernel, {self.best.words()}"


def best_at_end(store: Store, session_id: str) -> BestAtEnd | None:
    """The session's last end and its best accepted kernel; None before it ended."""
    ended = next(
        (
            event
            for row in reversed(store.events(session_id))
            if row.kind == SessionEnded.kind
            and isinstance(event := decode(row.kind, row.payload), SessionEnded)
        ),
        None,
    )
    if ended is None:
        return None
    best = store.best_kernel(session_id)
    if best is None or not best.accepted:
        return BestAtEnd(ended.reason, None, None, None)
    assert best.evaluation is not None  # an accepted version's latest evaluation accepted it
    profiles = store.profiles(best.version.id)
    profile = ProfileSummary.from_json(profiles[-1].profile) if profiles else None
    return BestAtEnd(ended.reason, best, EvalReport.from_json(best.evaluation.report), profile)


def error_words(error: BaseException) -> str:
    """An exception as a session's end states it: its type, its message and where it was
    raised (what a report of the fault needs; no traceback reaches the engineer's terminal)."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"
