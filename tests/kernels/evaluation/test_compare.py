"""Output comparison: allclose in float64, NaN from unwritten memory named, worst element
located."""

import numpy as np

from maxkernel_tui.kernels.evaluation import compare
from maxkernel_tui.kernels.evaluation.compare import compare_arrays, compare_files
from maxkernel_tui.kernels.report.reasons import Mismatch, Reason
from maxkernel_tui.kernels.report.words import comparison_words
from maxkernel_tui.kernels.task import Tolerance

TOL = Tolerance(atol=0.01, rtol=0.01)


def test_within_tolerance_reports_the_worst_element():
    reference = np.linspace(-1, 1, 64).reshape(8, 8)
    candidate = reference.copy()
    candidate[3, 5] += 0.005
    result = compare_arrays(candidate, reference, TOL)
    assert result.ok and result.worst_index == (3, 5) and np.isclose(result.max_abs, 0.005)


def test_outside_tolerance_counts_mismatches():
    reference = np.ones((4, 4))
    candidate = reference.copy()
    candidate[0, :2] = 1.5
    result = compare_arrays(candidate, reference, TOL)
    assert not result.ok and result.mismatched == 2 and result.total == 16
    assert result.reason == Reason.OUTSIDE_TOLERANCE


def test_nan_from_unwritten_memory_is_named():
    candidate = np.ones((4, 4), np.float32)
    candidate[2:] = np.nan
    result = compare_arrays(candidate, np.ones((4, 4)), TOL)
    assert not result.ok and result.reason == Reason.NON_FINITE and result.non_finite == 8
    assert (result.total, result.first_non_finite, result.first_is_nan) == (16, (2, 0), True)
    assert "is every output block written?" in comparison_words(result)  # the hint, in words


def test_shape_mismatch_and_output_count(tmp_path):
    shape = compare_arrays(np.ones(4), np.ones(5), TOL)
    assert shape.reason == Reason.OUTPUT_MISMATCH and shape.mismatch == Mismatch.OUTPUT_SHAPE
    assert (shape.got, shape.wanted) == ((4,), (5,))
    np.save(tmp_path / "a.npy", np.ones(3))
    count = compare_files([str(tmp_path / "a.npy")], ["x", "y"], TOL)
    assert count.reason == Reason.OUTPUT_MISMATCH and count.mismatch == Mismatch.OUTPUT_COUNT
    assert (count.got, count.wanted) == ((1,), (2,))


def test_relative_error_ignores_exact_zeros_of_the_reference():
    # A ReLU output: half exact zeros, where the candidate is off by a rounding error (1e-7).
    # |Δ|/|ref| there would be ~1e+301 (divided by the smallest float); it must not be shown.
    reference = np.maximum(np.linspace(-1, 1, 64), 0.0)
    candidate = reference + 1e-7
    result = compare_arrays(candidate, reference, TOL)
    assert result.ok and result.max_rel < 1e-5
    assert 0 < result.tolerance_used < 0.01
    assert "(where |ref| > atol)" in comparison_words(result)  # so the words say


def test_the_share_of_tolerance_passes_one_exactly_when_the_check_fails():
    reference = np.zeros((4, 4))
    candidate = reference.copy()
    candidate[1, 1] = 0.02  # twice atol, where relative error has no meaning
    result = compare_arrays(candidate, reference, TOL)
    assert not result.ok and result.max_rel == 0.0 and np.isclose(result.tolerance_used, 2.0)
    assert result.reason == Reason.OUTSIDE_TOLERANCE


def test_chunks_find_what_one_pass_over_the_whole_array_finds(monkeypatch):
    """Compared in chunks of 7 elements (millions at production), the worst element, the count
    outside, the largest relative error and every share are those of the whole array at once,
    equal infinities and NaN where the reference has NaN included."""
    monkeypatch.setattr(compare, "_CHUNK", 7)
    rng = np.random.default_rng(3)
    reference = rng.standard_normal((5, 9)).astype(np.float32)
    reference[1, 2], reference[4, 0] = np.inf, np.nan
    candidate = reference + rng.standard_normal((5, 9)).astype(np.float32) * 0.004
    candidate[1, 2], candidate[4, 0] = np.inf, np.nan
    candidate[3, 7] += 0.3  # in the fourth chunk
    candidate[0, 1] += 0.05
    found, shares = compare.compare_with_shares(candidate, reference, TOL)
    got, want = candidate.astype(np.float64).reshape(-1), reference.astype(np.float64).reshape(-1)
    usable = np.isfinite(want)
    with np.errstate(invalid="ignore"):
        error = np.where(usable, np.abs(got - want), 0.0)
    allowed = TOL.atol + TOL.rtol * np.abs(want)
    assert found.worst_index == (3, 7) and found.max_abs == error.max()
    assert found.mismatched == int((error > allowed).sum()) >= 2 and not found.ok
    large = usable & (np.abs(want) > TOL.atol)
    assert found.max_rel == (error[large] / np.abs(want[large])).max()
    np.testing.assert_array_equal(shares, np.where(usable, error / allowed, 0.0))
    assert found.tolerance_used == shares.max()
