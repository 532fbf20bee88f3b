"""Timing statistics, and that no time measured off a TPU is ever shown as a kernel time."""

import dataclasses
import json
import random

import pytest

from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingRequest, TimingSamples
from maxkernel_tui.kernels.evaluation.timing import worker as timing_worker
from maxkernel_tui.kernels.evaluation.timing.check import (
    summarize_timing,
    timing_check,
    tpu_present,
)
from maxkernel_tui.kernels.evaluation.timing.stats import median_estimate, speedup
from maxkernel_tui.kernels.evaluation.tracer.tracing import trace_source
from maxkernel_tui.kernels.loader import find_task, load_task
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.report.reasons import Reason
from maxkernel_tui.kernels.snapshot import snapshot_task
from tests.support.paths import GRADIENT_TASKS, KERNELS


def noisy(center, spread, n=50, seed=0):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_clear_win_is_significant():
    gain = speedup(baseline=noisy(2.0, 0.05), candidate=noisy(1.0, 0.05, seed=1))
    assert 1.9 < gain.ratio < 2.1 and gain.significant_win and "significant)" in gain.describe()


def test_overlapping_noise_is_not_a_win():
    gain = speedup(baseline=noisy(1.02, 0.5), candidate=noisy(1.0, 0.5, seed=1))
    assert (
        not gain.significant_win
        and gain.low < 1 < gain.high
        and "not significant" in gain.describe()
    )


def test_median_interval_contains_the_median():
    estimate = median_estimate(noisy(3.0, 0.1))
    assert estimate.low <= estimate.median <= estimate.high and estimate.high - estimate.low < 0.3


def test_tpu_timings_are_labelled_measured_with_their_device():
    answer = TimingAnswer(
        platform="tpu",
        device="TPU v5 lite",
        samples=TimingSamples(candidate=noisy(1e-3, 0.02), reference=noisy(1.5e-3, 0.02, seed=2)),
    )
    check, timings = summarize_timing(answer)
    assert check.status == "pass" and check.reason == Reason.SPEEDUP_SIGNIFICANT
    assert all(t.kind == "measured" and t.device == "TPU v5 lite (tpu)" for t in timings)
    assert timings[2].significant and 1.4 < timings[2].ratio < 1.6


@pytest.mark.slow  # runs the kernel under jax in this process
def test_times_off_a_tpu_are_never_shown(suite_tasks, monkeypatch, tmp_path):
    task = find_task("12p", suite_tasks)
    kernel = KERNELS / "honest" / "12p_RMSNorm.py"
    program = tmp_path / "program.bin"  # traced in a sandboxed tracer, as an evaluation's is
    program.write_bytes(
        trace_source(kernel.read_text(), snapshot_task(task, tmp_path), 120, ["check"])["check"]
    )
    request = TimingRequest(
        program=str(program),
        task=str(task.folder),
        config="check",
        repeats=3,
        warmups=1,
    )
    answer = timing_worker.measure(
        TimingRequest.from_json(json.loads(json.dumps(request.to_json())))
    )
    assert answer.platform == "cpu" and len(answer.samples.candidate) == 3
    assert TimingAnswer.from_json(json.loads(json.dumps(answer.to_json()))) == answer
    check, timings = summarize_timing(answer)
    assert check.status == "skip" and timings == [] and check.reason == Reason.TIMING_NOT_ON_TPU
    monkeypatch.setenv("MAXKERNEL_TUI_NO_TPU", "1")
    assert not tpu_present()
    skipped, none = timing_check(program, kernel.name, task, timeout=10)
    assert skipped.status == "skip" and none == [] and skipped.reason == Reason.NO_TPU


def test_a_report_read_back_from_json_is_the_same_report():
    answer = TimingAnswer(
        platform="tpu",
        device="TPU v5 lite",
        samples=TimingSamples(candidate=noisy(1e-3, 0.02), reference=noisy(1.5e-3, 0.02, seed=2)),
    )
    check, timings = summarize_timing(answer)
    report = EvalReport("12p", "k.py", ["v5e"], "cpu", [check], timings, [1, 2])
    again = EvalReport.from_json(json.loads(json.dumps(report.to_json())))
    assert again == report and again.verdict == report.verdict == "accepted"


@pytest.mark.slow  # traces in a sandboxed tracer, runs the kernel under jax in this process
def test_a_training_kernel_is_timed_forward_and_backward_against_xlas_gradient(tmp_path):
    """The timing of a task that asks for gradients runs the candidate's backward program (its
    forward too) against XLA's jax.vjp of the reference, on cotangents, and says so."""
    task = load_task(GRADIENT_TASKS / "rmsnorm_train")
    kernel = KERNELS / "gradients" / "rmsnorm_vjp.py"
    traced = trace_source(
        kernel.read_text(), snapshot_task(task, tmp_path), 120, ["check"], backward=True
    )
    program = tmp_path / "backward.bin"
    program.write_bytes(traced["check"])
    request = TimingRequest(
        str(program), str(task.folder), "check", 2, 1, gradients=list(task.gradients)
    )
    answer = timing_worker.measure(
        TimingRequest.from_json(json.loads(json.dumps(request.to_json())))
    )
    assert answer.gradients == ["x", "w"] and len(answer.samples.reference) == 2
    on_tpu = dataclasses.replace(answer, platform="tpu", device="TPU v5 lite")
    _, timings = summarize_timing(on_tpu)
    assert all("forward and backward, gradients of x, w" in t.label for t in timings)
    assert "against XLA's jax.vjp of the reference" in timings[-1].label


def test_a_forward_timing_says_nothing_of_gradients():
    answer = TimingAnswer("TPU v5 lite", "tpu", TimingSamples(noisy(1e-3, 0.02), noisy(2e-3, 0.02)))
    assert not any("backward" in t.label for t in summarize_timing(answer)[1])
