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
    return compare_with_shares(candidate, reference, tolerance)[0]


def compare_with_shares(
    candidate: np.ndarray, reference: np.ndarray, tolerance: Tolerance
) -> tuple[Comparison, np.ndarray]:
    """The comparison, and each element's share of its tolerance, |Δ| / (atol + rtol·|reference|),
    flat, in float64 (over 1: outside it; elements equal and not finite use none; empty where the
    comparison failed on shape or non-finite values), computed in one pass: a production sample
    has millions of elements."""
    if candidate.shape != reference.shape:
        return _failed(Mismatch.OUTPUT_SHAPE, candidate.shape, reference.shape), np.zeros(0)
    shape = reference.shape
    got = candidate.astype(np.float64).reshape(-1)  # flat, so 0-d outputs (a scalar loss) work too
    want = reference.astype(np.float64).reshape(-1)
    finite_want = np.isfinite(want)
    bad_values = ~np.isfinite(got) & finite_want
    if bad_values.any():
        flat = int(np.argmax(bad_values))
        nan = float("nan")
        failed = Comparison(
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
        return failed, np.zeros(0)
    if not got.size:
        return Comparison(True, 0.0, 0.0, 0.0, (), 0, 0), np.zeros(0)
    # in place where it can be: each new float64 buffer of millions of elements costs more
    # than the arithmetic on it
    error = np.subtract(got, want)
    np.abs(error, out=error)
    error[np.isnan(got) & np.isnan(want)] = 0.0
    magnitude = np.abs(want, out=want)
    allowed = np.multiply(magnitude, tolerance.rtol, out=got)
    allowed += tolerance.atol
    outside = int(np.count_nonzero(error > allowed))
    # Infinite references equal in the candidate leave NaN here (inf - inf): they are not errors.
    finite = np.isfinite(error) & finite_want
    large = finite & (magnitude > tolerance.atol)
    shares = np.divide(error, magnitude, out=np.zeros_like(error), where=large)
    max_rel = float(shares.max(initial=0.0))
    shares.fill(0.0)
    np.divide(error, allowed, out=shares, where=finite & (allowed > 0))
    found = Comparison(
        ok=outside == 0,
        max_abs=float(error.max()),
        max_rel=max_rel,
        tolerance_used=float(shares.max(initial=0.0)),
        worst_index=tuple(_index(int(np.argmax(error)), shape)),
        mismatched=outside,
        total=int(error.size),
    )
    return found, shares


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def _failed(mismatch: Mismatch, got: tuple[int, ...], wanted: tuple[int, ...]) -> Comparison:
    nan = float("nan")
    return Comparison(False, nan, nan, nan, (), 0, 0, mismatch, tuple(got), tuple(wanted))
