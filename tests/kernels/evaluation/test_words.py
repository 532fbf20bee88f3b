"""The sentences made from figures that once carried our own text: the words shown are those
shown before the figures became numbers and codes (report/words.py is their one maker)."""

from __future__ import annotations

import math

from maxkernel_tui.kernels.report.reasons import (
    Bodies,
    Comparison,
    Coverage,
    Defence,
    DefenceName,
    DefenceOutcome,
    DeviceNumerics,
    Finding,
    MatmulWork,
    Mismatch,
    OutsidePallas,
    ProductionSize,
    Ratio,
    Reason,
    RunFigures,
    Timed,
    TracerClaim,
    Unbelievable,
)
from maxkernel_tui.kernels.report.words import check_words, comparison_words, defence_words

FAILED = DefenceOutcome.FAILED
NAN = math.nan


def test_the_defences_say_what_they_found() -> None:
    little = MatmulWork("bench", 5e8, 1e9, 0.0, 0.9)
    assert defence_words(Defence(DefenceName.WORK, FAILED, Finding.TOO_LITTLE_WORK, little)) == (
        "the kernel does less matmul work than the reference needs (at least 0.9x; padding only "
        "adds): kernel 5e+08 matmul flops against the reference's 1e+09 (0.50x) at bench"
    )
    shrinks = Defence(DefenceName.COVERAGE, FAILED, Finding.COVERAGE_SHRINKS, Coverage(0.5))
    assert defence_words(shrinks) == (
        "the grid writes only 50.0% of an output (left to stale memory), against 100.0% at the "
        "checked shapes"
    )
    types = Bodies(1, 1, (), ("f8 x f8 -> f32",), ("bf16 x bf16 -> f32",))
    changed = Defence(DefenceName.BODIES, FAILED, Finding.MATMUL_TYPES_CHANGED, types)
    assert defence_words(changed) == (
        "the kernel's matmuls change operand types: ['f8 x f8 -> f32'] instead of "
        "['bf16 x bf16 -> f32']"
    )
    size = ProductionSize(4e12, 4096, 2**30, 2e9, 2048, 64 * 2**20)
    large = Defence(
        DefenceName.NUMERICS, DefenceOutcome.NOT_APPLICABLE, Finding.TOO_LARGE_TO_RUN, size
    )
    assert defence_words(large) == (
        "production shapes too large for interpret mode (4e+12 flops, 4096 grid steps, 1024 MiB "
        "of inputs; limits 2e+09, 2048, 64 MiB) and no TPU here"
    )


def test_the_trace_checks_say_what_the_figures_hold() -> None:
    claimed = Unbelievable(TracerClaim.JUDGES_CHECK, "trace", "pass")
    assert check_words(Reason.TRACER_UNBELIEVABLE, claimed) == (
        "the tracer claimed a pass 'trace' check, which only the judge gives: the kernel is "
        "rejected"
    )
    outside = OutsidePallas(2e9, 0.0, 1e6, 0.0, ("dot_general", "b", "c", "d"))
    assert check_words(Reason.HEAVY_WORK_OUTSIDE_PALLAS, outside) == (
        "heavy work runs in XLA outside the Pallas kernel(s): 2e+09 flops and 0 reduced elements "
        "outside, against the reference's 1e+06 flops and 0 (e.g. dot_general; b; c)"
    )


def test_comparisons_that_cannot_be_made_say_why() -> None:
    shape = Comparison(False, NAN, NAN, NAN, (), 0, 0, Mismatch.OUTPUT_SHAPE, (4,), (5,))
    assert comparison_words(shape) == "output shape [4] instead of [5]"
    count = Comparison(False, NAN, NAN, NAN, (), 0, 0, Mismatch.OUTPUT_COUNT, (1,), (2,))
    assert comparison_words(count) == "1 outputs instead of 2"
    nan = Comparison(False, NAN, NAN, NAN, (), 0, 16, Mismatch.NON_FINITE, (), (), 8, (2, 0), True)
    assert comparison_words(nan) == (
        "8/16 outputs are NaN or infinite (first NaN at [2, 0]); in TPU interpret mode "
        "unwritten memory reads as NaN: is every output block written?"
    )


def test_the_timing_names_its_clock() -> None:
    device = DeviceNumerics(True, "bench")
    timed = Timed(Ratio(1.0, 0.9, 1.1), False, None, device, "no trace")
    assert check_words(Reason.SPEEDUP_NOT_SIGNIFICANT, timed) == (
        "speedup over the XLA reference as written 1.00x (95% CI 0.90-1.10, not significant) "
        "(wall time around block_until_ready (dispatch included); no device trace: no trace); "
        "the task has no expert Pallas kernel; on the device at bench shapes: within the task's "
        "tolerance"
    )
    count = DeviceNumerics(False, "bench", outputs=1, expected=2)
    assert check_words(Reason.WRONG_ON_DEVICE, count) == (
        "wrong result on the device at bench shapes: 1 outputs instead of 2"
    )
    on_device = Timed(Ratio(2.0, 1.5, 2.5), True)
    assert "(device time from the profiler trace)" in check_words(
        Reason.SPEEDUP_SIGNIFICANT, on_device
    )


def test_a_gradients_failure_names_the_gradient_and_a_backward_in_xla_the_backward() -> None:
    wrong = Comparison(False, 0.3, 400.0, 1300.0, (1, 21), 1234, 65536)
    figures = RunFigures("check", 3, 2e-4, 2e-4, wrong, gradient="k")
    assert check_words(Reason.GRADIENT_OUTSIDE_TOLERANCE, figures).startswith(
        "check seed 3 gradient of k: wrong gradient (atol 0.0002, rtol 0.0002): 1234/65536 "
        "elements outside tolerance"
    )
    outside = OutsidePallas(2e8, 0.0, 3e8, 0.0, ("dot_general",))
    assert check_words(Reason.BACKWARD_WORK_OUTSIDE_PALLAS, outside).startswith(
        "the backward (jax.vjp of computation): heavy work runs in XLA outside the Pallas"
    )
