"""A near-tolerance kernel (a bf16 GEMM out of tolerance on a few elements at production depth
only) evaluated again and again gets the same sample and the same verdict, a rejection at
production tiles; on a TPU (its timing worker faked at the seam) the device's comparison of the
whole production output decides instead. The real harness: worker processes, sampled tiles in
interpret mode."""

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingSamples
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.evaluation.timing import check as timing
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import ON_DEVICE, TILES
from maxkernel_tui.kernels.report.reasons import DeviceNumerics, Reason, TilesFigures
from tests.support.near_tolerance import write_kernel, write_task

pytestmark = pytest.mark.slow

TILED = EvalOptions(seeds=1, tile_blocks=4)  # tests turn the sample off by default
REPEATS = 3


def _tiles(report):
    return next(c for c in report.checks if c.name == TILES)


def test_a_near_tolerance_kernel_gets_the_same_verdict_every_time(tmp_path):
    task = load_task(write_task(tmp_path / "tasks"))
    kernel = KernelSource.read(write_kernel(tmp_path / "kernel.py"))
    with Harness() as harness:
        reports = [harness.evaluate(kernel, task, TILED) for _ in range(REPEATS)]
    tiles = [_tiles(report) for report in reports]
    assert len({(t.status, t.reason, t.figures) for t in tiles}) == 1, [t.detail for t in tiles]
    first = reports[0]
    assert first.verdict == "rejected" and first.failure is tiles[0], first.failure
    assert tiles[0].reason == Reason.TILES_PROJECTED_OUTSIDE, tiles[0].detail
    figures = tiles[0].figures
    assert isinstance(figures, TilesFigures) and figures.projected is not None
    assert figures.projected > 1.0 and figures.comparison is not None and figures.comparison.ok
    assert f"projected to use {figures.projected:.0%} of the tolerance" in first.verdict_line


@pytest.mark.parametrize("within", [True, False], ids=["device_within", "device_outside"])
def test_on_a_tpu_the_whole_output_compared_on_the_device_decides(tmp_path, monkeypatch, within):
    answer = TimingAnswer(
        "TPU v5 lite",
        "tpu",
        TimingSamples(candidate=[1e-3] * 5, reference=[2e-3] * 5),
        numerics=DeviceNumerics(within, "bench"),
    )
    monkeypatch.setattr("maxkernel_tui.kernels.evaluation.harness.tpu_present", lambda: True)
    monkeypatch.setattr(timing, "tpu_present", lambda: True)
    monkeypatch.setattr(timing, "run_timing_worker", lambda *args, **kwargs: answer)
    monkeypatch.setattr(timing, "record_timing", lambda *args, **kwargs: None)
    task = load_task(write_task(tmp_path / "tasks"))
    kernel = KernelSource.read(write_kernel(tmp_path / "kernel.py"))
    with Harness() as harness:
        report = harness.evaluate(kernel, task, TILED)
    tiles = _tiles(report)
    assert tiles.status == "skip" and tiles.reason == Reason.TILES_LEFT_TO_DEVICE, tiles.detail
    if within:
        assert report.verdict == "accepted", report.failure
        assert report.verdict_line.endswith(ON_DEVICE)
        assert "device numerics at production shapes (pass)" in report.evidence
    else:
        assert report.failure is not None and report.failure.reason == Reason.WRONG_ON_DEVICE
