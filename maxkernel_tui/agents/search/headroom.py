"""What the performance model says of an accepted kernel, as the search reads it: the share of
the task's roofline its estimate reaches and what bounds it. A kernel whose estimate reaches the
search's floor of what any kernel could reach (the roofline plus the call's dispatch, which every
kernel pays) has no headroom the model can see: expanding it would spend evaluations on changes
the model cannot reward. No jax here."""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.basis import Basis


@dataclass(frozen=True)
class ModelView:
    """One kernel's estimate on one TPU generation, reduced to what decides where to search."""

    target: str
    bound: str  # perf.analysis.Bound: memory, compute or overhead
    roofline_share: float | None  # the task's roofline time over the kernel's estimated time
    basis: Basis  # estimated, or calibrated by TPU runs
    # (roofline + dispatch) over the estimate: the dispatch is in every kernel's time, so the
    # headroom a search can find is measured against the roofline plus it
    reachable_share: float | None = None

    def words(self) -> str:
        """e.g. "87% of roofline on v5e, compute-bound (estimated)"."""
        share = "?" if self.roofline_share is None else f"{self.roofline_share:.0%}"
        return f"{share} of roofline on {self.target}, {self.bound}-bound ({self.basis})"


def model_view(summary: ProfileSummary | None, target: str) -> ModelView | None:
    """The estimate on `target` in a profile; None when the profile has none."""
    if summary is None:
        return None
    found = next((e for e in summary.estimates if e.target == target), None)
    if found is None:
        return None
    reachable = (
        (found.roofline_seconds + found.dispatch_seconds) / found.seconds
        if found.roofline_seconds is not None and found.seconds > 0
        else None
    )
    return ModelView(found.target, str(found.bound), found.roofline_share, found.kind, reachable)


def no_headroom(
    number: int, share: float | None, target: str, basis: str, floor: float
) -> str | None:
    """Why node #`number` is not worth expanding (its estimate reaches `floor` of the roofline
    plus dispatch: `share`), or None: there is headroom, or the model gave no share to judge by."""
    if share is None or share < floor:
        return None
    who = "the seed" if number == 0 else f"#{number}"
    return (
        f"{who} is at {share:.0%} of roofline plus dispatch on {target} "
        f"({basis or Basis.ESTIMATED}): no headroom the model can see (the search's floor is "
        f"{floor:.0%})"
    )
