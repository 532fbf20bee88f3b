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


# max|Δ|, max rel and the tolerance used of a comparison that failed before any difference was
# taken (shapes, counts, non-finite outputs): none; zeros, not NaN, which the store refuses.
_NO_FIGURES = (0.0, 0.0, 0.0)

# Elements compared at a time: float64 temporaries of a chunk are reused from one chunk to the
# next, where whole-array ones (a production sample has millions of elements) cost more in fresh
# memory than the arithmetic on them.
_CHUNK = 1 << 18


def compare_with_shares(
    candidate: np.ndarray, reference: np.ndarray, tolerance: Tolerance
) -> tuple[Comparison, np.ndarray]:
    """The comparison, and each element's share of its tolerance, |Δ| / (atol + rtol·|reference|),
    flat, in float64 (over 1: outside it; elements equal and not finite use none; empty where the
    comparison failed on shape or non-finite values), computed in one pass."""
    if candidate.shape != reference.shape:
        return _failed(Mismatch.OUTPUT_SHAPE, candidate.shape, reference.shape), np.zeros(0)
    shape = reference.shape
    got_all = candidate.reshape(-1)  # flat, so 0-d outputs (a scalar loss) work too
    want_all = reference.reshape(-1)
    bad_values = ~np.isfinite(got_all) & np.isfinite(want_all)
    if bad_values.any():
        flat = int(np.argmax(bad_values))
        failed = Comparison(
            False,
            *_NO_FIGURES,
            (),
            0,
            int(got_all.size),
            Mismatch.NON_FINITE,
            non_finite=int(bad_values.sum()),
            first_non_finite=tuple(_index(flat, shape)),
            first_is_nan=bool(np.isnan(got_all[flat])),
        )
        return failed, np.zeros(0)
    if not got_all.size:
        return Comparison(True, 0.0, 0.0, 0.0, (), 0, 0), np.zeros(0)
    shares = np.empty(got_all.size, np.float64)
    outside, max_abs, worst, max_rel = 0, -1.0, 0, 0.0
    for start in range(0, got_all.size, _CHUNK):
        got = got_all[start : start + _CHUNK].astype(np.float64)
        want = want_all[start : start + _CHUNK].astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf - inf: handled below
            error = np.abs(got - want)
        error[np.isnan(got) & np.isnan(want)] = 0.0
        # Infinite references equal in the candidate leave NaN here (inf - inf): not errors.
        finite = np.isfinite(error) & np.isfinite(want)
        error[~finite] = 0.0
        magnitude = np.abs(want, out=want)
        allowed = np.multiply(magnitude, tolerance.rtol, out=got)
        allowed += tolerance.atol
        outside += int(np.count_nonzero(error > allowed))
        at = int(np.argmax(error))
        if error[at] > max_abs:
            max_abs, worst = float(error[at]), start + at
        part = shares[start : start + error.size]
        part.fill(0.0)
        np.divide(error, magnitude, out=part, where=finite & (magnitude > tolerance.atol))
        max_rel = max(max_rel, float(part.max(initial=0.0)))
        part.fill(0.0)
        np.divide(error, allowed, out=part, where=finite & (allowed > 0))
    found = Comparison(
        ok=outside == 0,
        max_abs=max_abs,
        max_rel=max_rel,
        tolerance_used=float(shares.max(initial=0.0)),
        worst_index=tuple(_index(worst, shape)),
        mismatched=outside,
        total=int(got_all.size),
    )
    return found, shares


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def _failed(mismatch: Mismatch, got: tuple[int, ...], wanted: tuple[int, ...]) -> Comparison:
    return Comparison(False, *_NO_FIGURES, (), 0, 0, mismatch, tuple(got), tuple(wanted))
