"""The one definition of a session's best kernel, on the rows `Store.best_kernel` reads: the
best score among its accepted versions (a version is accepted when its latest evaluation is;
scores of one kind only, that of its first scored accepted version; the earliest of equals),
else its latest accepted version where none has a score, else its latest version. Stdlib and
the report's verdicts only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.store.kinds import BestRule


@dataclass(frozen=True)
class Candidate:
    """A kernel version as the rule sees it."""

    version_id: int
    score: float | None
    kind: str | None  # the score's kind; None without a score
    verdict: Verdict | None  # its latest evaluation's verdict; None: not evaluated

    @classmethod
    def of_row(cls, row: tuple[Any, ...]) -> Candidate:
        """A (version id, score, score kind, verdict) row, its verdict typed."""
        version_id, score, kind, verdict = row
        return cls(version_id, score, kind, None if verdict is None else Verdict(verdict))


@dataclass(frozen=True)
class Pick:
    version_id: int
    rule: BestRule
    score: float | None
    kind: str  # "" without a score


def pick_best(versions: list[Candidate]) -> Pick | None:
    """The best of a session's versions (oldest first); None when it has none."""
    if not versions:
        return None
    accepted = [v for v in versions if v.verdict == Verdict.ACCEPTED]
    scored = [v for v in accepted if v.score is not None]
    if scored:
        kind = scored[0].kind
        best = max((v for v in scored if v.kind == kind), key=lambda v: v.score or 0.0)
        return Pick(best.version_id, BestRule.BEST_SCORE, best.score, best.kind or "")
    if accepted:
        return Pick(accepted[-1].version_id, BestRule.LATEST_ACCEPTED, None, "")
    return Pick(versions[-1].version_id, BestRule.NOTHING_ACCEPTED, None, "")
