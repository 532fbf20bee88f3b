"""Precision is judged on the sampled errors projected to the whole output, not on whether the
sample met the worst element; the same kernel gets the same sample and verdict every time; on a
TPU the device's comparison of the whole output decides. NumPy only (synthetic error
distributions of a known tail), the device's timing worker faked at its seam."""

import numpy as np
import pytest

from maxkernel_tui.kernels.evaluation.protocol import TilesRun, TimingAnswer, TimingSamples
from maxkernel_tui.kernels.evaluation.tiles import plan
from maxkernel_tui.kernels.evaluation.tiles.projection import project
from maxkernel_tui.kernels.evaluation.tiles.verdict import projected_outside, tiles_check, unjudged
from maxkernel_tui.kernels.evaluation.timing import check as timing
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import ON_DEVICE, SKIP, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import (
    DefenceOutcome,
    DeviceNumerics,
    Misfit,
    Reason,
    TilesFigures,
    Unfit,
)
from tests.support.gemm_relu_variants import TASK

MISFIT = Misfit("matmul_kernel", 0, 0, 8192, 2048)
SAMPLED = DefenceOutcome.SAMPLED
SHAPE = (1000, 1000)  # the whole output: 1e6 elements
CHECKED = 20_000  # of which a sample checks these


def _run(tmp_path, shares, shape=SHAPE):
    """A sampled run whose elements use `shares` of the task's tolerance (atol = rtol = 1e-2 on
    a reference of ones: 0.02 each), at the first flat indices of an output of `shape`."""
    want = np.ones(len(shares), np.float32)
    values = (want + np.asarray(shares) * 0.02).astype(np.float32)
    np.save(tmp_path / "values.npy", values)
    np.save(tmp_path / "indices.npy", np.arange(len(shares), dtype=np.int64))
    run = TilesRun(
        "bench",
        0,
        7,
        values=[str(tmp_path / "values.npy")],
        indices=[str(tmp_path / "indices.npy")],
        blocks=4,
        of_blocks=200,
        shapes=[list(shape)],
    )
    return run, [want]


def _heavy_tail(scale=0.08):
    """Exponential shares: the sample's largest about 0.8, the whole output's about 1.1."""
    shares = np.random.default_rng(0).exponential(scale, CHECKED)
    assert shares.max() < 0.95
    return shares


def test_a_heavy_tail_within_tolerance_where_checked_projects_outside_it_and_fails(tmp_path):
    task = load_task(TASK)
    check = tiles_check(task, *_run(tmp_path, _heavy_tail()))
    assert check.status == "fail" and check.reason == Reason.TILES_PROJECTED_OUTSIDE
    figures = check.figures
    assert isinstance(figures, TilesFigures) and figures.comparison is not None
    assert figures.comparison.ok and figures.comparison.tolerance_used < 0.95
    # the largest of 1e6 exponential draws of scale 0.08 is about 0.08 * ln(1e6) = 1.1
    assert 1.0 < figures.projected < 1.3
    assert (figures.projected_from, figures.of_elements) == (CHECKED, 1_000_000)
    # about 1e6 * exp(-1 / 0.08) = 4 elements over the tolerance
    assert 1 <= figures.projected_over <= 20
    assert f"projected to use {figures.projected:.0%} of the tolerance" in check.detail
    assert f"outside it on about {figures.projected_over} of 1000000 elements" in check.detail


def test_a_light_tail_passes_with_its_projected_share_shown(tmp_path):
    task = load_task(TASK)
    shares = np.random.default_rng(0).uniform(0.0, 0.8, CHECKED)  # bounded: nothing beyond 0.8
    check = tiles_check(task, *_run(tmp_path, shares))
    assert check.status == "pass" and check.reason == Reason.TILES_SAMPLED
    figures = check.figures
    assert isinstance(figures, TilesFigures) and figures.projected is not None
    assert shares.max() <= figures.projected < 0.85
    assert f"projected to use {figures.projected:.0%} of the tolerance" in check.detail


def test_every_element_checked_gives_the_exact_largest_share(tmp_path):
    task = load_task(TASK)
    shares = _heavy_tail()[:10_000]  # a tail that would project past 1 over more elements
    check = tiles_check(task, *_run(tmp_path, shares, shape=(100, 100)))
    assert check.status == "pass"
    figures = check.figures
    assert isinstance(figures, TilesFigures)
    assert figures.projected == pytest.approx(shares.max(), abs=1e-4)
    assert figures.projected_from == figures.of_elements == 10_000
    assert "(measured: every element)" in check.detail
    assert project(np.array([0.5, 1.5, 0.2]), 3).over == 1  # exact: the ones seen over it


def test_a_near_tolerance_kernel_gets_the_same_sample_and_verdict_ten_times(tmp_path):
    # its seed: a function of the kernel's source and the task, not a fresh draw
    source, digest = "def computation(a, b): ...\n", "0123abcd"
    request = plan.request(load_task(TASK), 4, whole=True, source=source, task_digest=digest)
    assert request is not None
    again = [
        plan.request(load_task(TASK), 4, whole=True, source=source, task_digest=digest)
        for _ in range(10)
    ]
    assert again == [request] * 10
    assert plan.sample_seed(source + " ", digest, "bench", 4) != request.sample_seed
    assert plan.sample_seed(source, "another task", "bench", 4) != request.sample_seed
    assert 0 <= request.sample_seed < plan.SEED_LIMIT
    # shares whose whole-output tail is at the tolerance: one verdict, the same every time
    shares = _heavy_tail(scale=1 / np.log(1e6))
    verdicts = [tiles_check(load_task(TASK), *_run(tmp_path, shares)) for _ in range(10)]
    assert len({(c.status, c.reason, c.figures) for c in verdicts}) == 1


def _device(monkeypatch, numerics):
    """The TPU's timing worker faked at its seam: its answer, with the device's comparison of the
    whole production output (`numerics`; None: it compared nothing)."""
    answer = TimingAnswer(
        "TPU v5 lite",
        "tpu",
        TimingSamples(candidate=[1e-3] * 5, reference=[2e-3] * 5),
        numerics=numerics,
    )
    monkeypatch.setattr(timing, "tpu_present", lambda: True)
    monkeypatch.setattr(timing, "run_timing_worker", lambda *args, **kwargs: answer)
    monkeypatch.setattr(timing, "record_timing", lambda *args, **kwargs: None)
    return timing.timing_check(None, "k.py", load_task(TASK), 10)[0]


@pytest.mark.parametrize("device", ["within", "outside", "not compared"])
def test_on_a_tpu_the_devices_comparison_of_the_whole_output_decides(tmp_path, monkeypatch, device):
    task = load_task(TASK)
    left = tiles_check(task, *_run(tmp_path, _heavy_tail()), device_compares=True)
    assert left.status == "skip" and left.reason == Reason.TILES_LEFT_TO_DEVICE
    assert "the device's comparison of the whole production output decides" in left.detail
    numerics = {
        "within": DeviceNumerics(True, "bench"),
        "outside": DeviceNumerics(False, "bench"),
        "not compared": None,
    }[device]
    # a derived configuration the kernel's tiles do not fit waits for the device's comparison
    unfit = Check("numerics", SKIP, Reason.UNFIT_TILES, Unfit("check", MISFIT, SAMPLED))
    assert unjudged(EvalReport("t", "k.py", ["v5e"], "tpu", [unfit, left])) is None
    report = EvalReport("t", "k.py", ["v5e"], "tpu", [left, _device(monkeypatch, numerics)])
    if (unsettled := projected_outside(report)) is not None:
        report.add(unsettled)
    if device == "within":
        assert report.verdict == "accepted", report.failure
        assert report.verdict_line.endswith(ON_DEVICE)
    elif device == "outside":
        assert report.failure is not None and report.failure.reason == Reason.WRONG_ON_DEVICE
    else:  # the projection stands where the device compared nothing
        assert report.failure is not None
        assert report.failure.reason == Reason.TILES_PROJECTED_OUTSIDE
