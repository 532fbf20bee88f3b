"""The fitness a loop ranks kernels by, and its kind. A measured speedup (a TPU timed the kernel
against the XLA reference) and an estimated one (the performance model) are never compared: a
session ranks by one kind, and says which. Estimated speedups are over one of two XLAs (the
reference as written, or at the MXU passes the task's tolerance needs: perf/vs_xla.py); a session
ranks by the one its limits name (`LoopLimits.rank_by`) and keeps the other beside its score.
No jax here."""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.perf.vs_xla import XlaBaseline
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.report.checks import EvalReport


@dataclass(frozen=True)
class Score:
    value: float | None
    kind: str  # says measured or estimated, against which XLA, and where
    also: str = ""  # the other speedup over XLA, labelled, that this score does not rank by


def measured_score(
    report: EvalReport, profile: ProfileSummary | None = None, target: str = ""
) -> Score | None:
    """The TPU-measured speedup over the XLA reference as written in an evaluation report, if it
    has one (the device runs the reference as it is written; XLA at the tolerance's precision
    is not timed: beside it, the model's estimate against that XLA on `target`, where `profile`
    has one)."""
    for timing in report.timings:
        if timing.kind == Basis.MEASURED and timing.ratio is not None:
            found = profile and next((e for e in profile.estimates if e.target == target), None)
            estimated = f"; {found.speedups.other(XlaBaseline.AS_WRITTEN)}" if found else ""
            return Score(
                float(timing.ratio),
                f"measured speedup vs XLA (as written) on {timing.device}",
                f"vs XLA@tolerance: not measured{estimated}",
            )
    return None


def estimated_score(
    profile: ProfileSummary, target: str, rank_by: XlaBaseline = XlaBaseline.TOLERANCE
) -> Score:
    """The model's speedup over XLA's estimate for the reference on `target`, against the XLA
    `rank_by` names (against XLA as written where the tolerance's precision is not known, and
    its kind says so); the share of the roofline when XLA gave no estimate."""
    estimate = next((e for e in profile.estimates if e.target == target), None)
    if estimate is None:
        return Score(None, f"estimated on {target}: no estimate")
    if not estimate.fits_vmem:
        return Score(None, f"estimated on {target}: the blocks do not fit VMEM")
    both = estimate.speedups
    figure = both.figure(rank_by) or both.as_written
    if figure.speedup is not None:
        return Score(float(figure.speedup), figure.kind(), both.other(figure.baseline))
    share = estimate.roofline_share
    return Score(
        None if share is None else float(share), f"estimated share of roofline on {target}"
    )


def significantly_better(new: float | None, old: float | None, threshold: float) -> bool:
    """`new` beats `old` by more than the relative `threshold` (estimates are not exact either)."""
    if new is None:
        return False
    return old is None or new > old * (1.0 + threshold)
