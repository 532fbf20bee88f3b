"""What a session ends on: its best accepted kernel, with that kernel's own evaluation report and
profile, or the plain fact that there is none. The workbench shows it when Auto or Graph ends
(never the last, maybe rejected, version), and a hand-off to Graph seeds from it. Read from the
store, so it holds for a session that ended in another process too. No jax here."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.agents.orchestration.events import SessionEnded, decode
from maxkernel_tui.kernels.evaluation.report import ACCEPTED, EvalReport
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.rows import KernelVersion


@dataclass(frozen=True)
class BestAtEnd:
    reason: str  # why the session ended
    version: KernelVersion | None  # the best accepted kernel; None when nothing was accepted
    report: EvalReport | None  # its accepted evaluation
    profile: ProfileSummary | None  # its latest profile, if it was profiled
    score_words: str  # "1.42 (estimated speedup vs XLA on v5e)", or "no score"

    def words(self) -> str:
        if self.version is None:
            return f"ended ({self.reason}) without an accepted kernel: the source is not one"
        return (
            f"ended ({self.reason}); the workbench shows its best accepted kernel, "
            f"v{self.version.number}: {self.score_words}"
        )


def best_at_end(store: Store, session_id: str) -> BestAtEnd | None:
    """The session's last end and the best accepted kernel it named; None before it ended."""
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
    if ended.best_version_id is None:
        return BestAtEnd(ended.reason, None, None, None, "no score")
    version = store.kernel_version(ended.best_version_id)
    accepted = [e for e in store.evaluations(version.id) if e.verdict == ACCEPTED]
    report = EvalReport.from_json(accepted[-1].report) if accepted else None
    profiles = store.profiles(version.id)
    profile = ProfileSummary.from_json(profiles[-1].profile) if profiles else None
    score = (
        "no score" if ended.best_score is None else f"{ended.best_score:.3g} ({ended.score_kind})"
    )
    return BestAtEnd(ended.reason, version, report, profile, score)


def error_words(error: BaseException) -> str:
    """An exception as a session's end states it: its type, its message and where it was
    raised (what a report of the fault needs; no traceback reaches the engineer's terminal)."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"
