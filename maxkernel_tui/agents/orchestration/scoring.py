"""The fitness a loop ranks kernels by, and its kind. A measured speedup (a TPU timed the kernel
against the XLA reference) and an estimated one (the performance model) are never compared: a
session ranks by one kind, and says which."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Score:
    value: float | None
    kind: str  # says measured or estimated, what, and where

    @property
    def measured(self) -> bool:
        return self.kind.startswith("measured")


def measured_score(report: dict[str, Any]) -> Score | None:
    """The TPU-measured speedup over the XLA reference in an evaluation report, if it has one."""
    for timing in report.get("timings", []):
        if timing.get("kind") == "measured" and "ratio" in timing:
            return Score(float(timing["ratio"]), f"measured speedup vs XLA on {timing['device']}")
    return None


def estimated_score(profile: dict[str, Any], target: str) -> Score:
    """The model's speedup over XLA's estimate for the reference on `target`; the share of the
    roofline when XLA gave no estimate."""
    estimate = next((e for e in profile.get("estimates", []) if e["target"] == target), None)
    if estimate is None:
        return Score(None, f"estimated on {target}: no estimate")
    if not estimate.get("fits_vmem", True):
        return Score(None, f"estimated on {target}: the blocks do not fit VMEM")
    if estimate.get("speedup") is not None:
        calibrated = " (calibrated)" if estimate["kind"] != "estimated" else ""
        return Score(
            float(estimate["speedup"]), f"estimated speedup vs XLA on {target}{calibrated}"
        )
    share = estimate.get("roofline_share")
    return Score(
        None if share is None else float(share), f"estimated share of roofline on {target}"
    )


def significantly_better(new: float | None, old: float | None, threshold: float) -> bool:
    """`new` beats `old` by more than the relative `threshold` (estimates are not exact either)."""
    if new is None:
        return False
    return old is None or new > old * (1.0 + threshold)
