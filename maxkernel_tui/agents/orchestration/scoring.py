"""The fitness a loop ranks kernels by, and its kind. A measured speedup (a TPU timed the kernel
against the XLA reference) and an estimated one (the performance model) are never compared: a
session ranks by one kind, and says which. No jax here."""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.report.checks import EvalReport


@dataclass(frozen=True)
class Score:
    value: float | None
    kind: str  # says measured or estimated, what, and where


def measured_score(report: EvalReport) -> Score | None:
    """The TPU-measured speedup over the XLA reference in an evaluation report, if it has one."""
    for timing in report.timings:
        if timing.kind == Basis.MEASURED and timing.ratio is not None:
            return Score(float(timing.ratio), f"measured speedup vs XLA on {timing.device}")
    return None


def estimated_score(profile: ProfileSummary, target: str) -> Score:
    """The model's speedup over XLA's estimate for the reference on `target`; the share of the
    roofline when XLA gave no estimate."""
    estimate = next((e for e in profile.estimates if e.target == target), None)
    if estimate is None:
        return Score(None, f"estimated on {target}: no estimate")
    if not estimate.fits_vmem:
        return Score(None, f"estimated on {target}: the blocks do not fit VMEM")
    if estimate.speedup is not None:
        calibrated = " (calibrated)" if estimate.kind != Basis.ESTIMATED else ""
        return Score(float(estimate.speedup), f"estimated speedup vs XLA on {target}{calibrated}")
    share = estimate.roofline_share
    return Score(
        None if share is None else float(share), f"estimated share of roofline on {target}"
    )


def significantly_better(new: float | None, old: float | None, threshold: float) -> bool:
    """`new` beats `old` by more than the relative `threshold` (estimates are not exact either)."""
    if new is None:
        return False
    return old is None or new > old * (1.0 + threshold)
