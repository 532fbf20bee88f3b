"""What measured a timing is said with every figure: device time from the trace, or the wall
clock with the reason; a wrong result on the device fails the check instead of being timed."""

import json
import random

from maxkernel_tui.kernels.evaluation.protocol import (
    DEVICE_TRACE,
    WALL_CLOCK,
    DeviceNumerics,
    TimingAnswer,
    TimingSamples,
)
from maxkernel_tui.kernels.evaluation.timing.check import summarize_timing
from maxkernel_tui.kernels.report.reasons import Comparison, Reason, Timed


def answer(**fields):
    rng = random.Random(0)
    samples = TimingSamples(
        candidate=[1e-3 * (1 + rng.uniform(-0.02, 0.02)) for _ in range(30)],
        reference=[2e-3 * (1 + rng.uniform(-0.02, 0.02)) for _ in range(30)],
    )
    return TimingAnswer(device="TPU v5 lite", platform="tpu", samples=samples, **fields)


def test_device_trace_timings_say_so_on_every_figure_and_in_the_check():
    timed = answer(clock=DEVICE_TRACE, numerics=DeviceNumerics(True, "bench"))
    assert TimingAnswer.from_json(json.loads(json.dumps(timed.to_json()))) == timed
    check, timings = summarize_timing(timed)
    assert check.status == "pass" and check.reason == Reason.SPEEDUP_SIGNIFICANT
    assert isinstance(check.figures, Timed) and check.production_shapes
    assert check.figures.device_clock
    assert check.figures.device_numerics == DeviceNumerics(True, "bench")
    assert all("device time from the profiler trace" in t.label for t in timings)


def test_a_wall_clock_fallback_is_labelled_with_its_reason():
    check, timings = summarize_timing(answer(clock=WALL_CLOCK, clock_note="no trace written"))
    words = "wall time around block_until_ready (dispatch included); no device trace: "
    assert all(words + "no trace written" in t.label for t in timings)
    assert isinstance(check.figures, Timed) and not check.figures.device_clock
    assert check.figures.clock_note == "no trace written"


def test_a_wrong_result_on_the_device_fails_the_timing_check_with_no_figures():
    far = Comparison(False, 3.0, 1.0, 2.0, (0,), 4, 16)
    wrong = DeviceNumerics(False, "bench", 0, far)
    check, timings = summarize_timing(answer(numerics=wrong))
    assert check.status == "fail" and timings == [] and check.reason == Reason.WRONG_ON_DEVICE
    assert check.figures == wrong
    # the timing check's words: what the device found, where
    assert check.detail.startswith("wrong result on the device at bench shapes, output 0: 4/16")
