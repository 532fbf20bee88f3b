"""Candidate outputs against reference outputs, in the caller's process. NumPy only, no jax.

allclose semantics (|candidate - reference| <= atol + rtol * |reference|) in float64, per
output leaf; a NaN or infinity where the reference is finite fails, since TPU interpret mode
fills memory a kernel never wrote with NaN.

Relative error is reported only over elements whose reference is larger than atol: near an exact
zero (a ReLU's output) |Δ|/|reference| means nothing, and atol is what judges those elements. The
share of the tolerance the worst element uses (|Δ| / (atol + rtol·|reference|)) is shown too: it
is meaningful everywhere and is what the verdict rests on (over 100% fails).
"""

from __future__ import annotations

import numpy as np

from maxkernel_tui.kernels.report.reasons import Comparison as Comparison
from maxkernel_tui.kernels.report.reasons import Mismatch
from maxkernel_tui.kernels.task import Tolerance


def compare_files(
    candidate_files: list[str], reference_files: list[str], tolerance: Tolerance
) -> Comparison:
    if len(candidate_files) != len(reference_files):
        counts = (len(candidate_files),), (len(reference_files),)
        return _failed(Mismatch.OUTPUT_COUNT, *counts)
    results = [
        compare_arrays(np.load(c, allow_pickle=False), np.load(r, allow_pickle=False), tolerance)
        for c, r in zip(candidate_files, reference_files, strict=True)
    ]
    failed = [r for r in results if not r.ok]
    return failed[0] if failed else max(results, key=lambda r: r.max_abs)


def compare_arrays(
    candidate: np.ndarray, reference: np.ndarray, tolerance: Tolerance
) -> Comparison:
    if candidate.shape != reference.shape:
        return _failed(Mismatch.OUTPUT_SHAPE, candidate.shape, reference.shape)
    shape = reference.shape
    got = candidate.astype(np.float64).reshape(-1)  # flat, so 0-d outputs (a scalar loss) work too
    want = reference.astype(np.float64).reshape(-1)
    bad_values = ~np.isfinite(got) & np.isfinite(want)
    if bad_values.any():
        flat = int(np.argmax(bad_values))
        nan = float("nan")
        return Comparison(
            False,
            nan,
            nan,
            nan,
            (),
            0,
            int(got.size),
            Mismatch.NON_FINITE,
            non_finite=int(bad_values.sum()),
            first_non_finite=tuple(_index(flat, shape)),
            first_is_nan=bool(np.isnan(got[flat])),
        )
    error = np.abs(got - want)
    error[np.isnan(got) & np.isnan(want)] = 0.0
    allowed = tolerance.atol + tolerance.rtol * np.abs(want)
    outside = error > allowed
    if not error.size:
        return Comparison(True, 0.0, 0.0, 0.0, (), 0, 0)
    # Infinite references equal in the candidate leave NaN here (inf - inf): they are not errors.
    finite = np.isfinite(error) & np.isfinite(want)
    large = finite & (np.abs(want) > tolerance.atol)
    relative = error[large] / np.abs(want[large])
    used = tolerance_shares(got, want, tolerance)
    return Comparison(
        ok=not outside.any(),
        max_abs=float(error.max()),
        max_rel=float(relative.max(initial=0.0)),
        tolerance_used=float(used.max(initial=0.0)),
        worst_index=tuple(_index(int(np.argmax(error)), shape)),
        mismatched=int(outside.sum()),
        total=int(error.size),
    )


def tolerance_shares(got: np.ndarray, want: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    """Each element's share of its tolerance, |Δ| / (atol + rtol·|reference|), flat, in float64
    (over 1: outside it); elements equal and not finite (both NaN, both the same infinity) use
    none. Non-finite values where the reference is finite are compare_arrays' to fail."""
    got = got.astype(np.float64).reshape(-1)
    want = want.astype(np.float64).reshape(-1)
    error = np.abs(got - want)
    allowed = tolerance.atol + tolerance.rtol * np.abs(want)
    usable = np.isfinite(error) & np.isfinite(want) & (allowed > 0)
    return np.divide(error, allowed, out=np.zeros_like(error), where=usable)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def _failed(mismatch: Mismatch, got: tuple[int, ...], wanted: tuple[int, ...]) -> Comparison:
    nan = float("nan")
    return Comparison(False, nan, nan, nan, (), 0, 0, mismatch, tuple(got), tuple(wanted))
