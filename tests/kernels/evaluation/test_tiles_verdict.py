"""The tiles check compares only the sampled elements with the reference's production outputs,
says where a wrong one is, and never lets a run that decided nothing pass. NumPy only."""

import numpy as np

from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, TilesRun
from maxkernel_tui.kernels.evaluation.tiles_verdict import not_sampled, tiles_check
from maxkernel_tui.kernels.loader import load_task
from tests.support.gemm_relu_variants import TASK


def _files(tmp_path, reference, indices, values):
    np.save(tmp_path / "reference-0.npy", reference)
    np.save(tmp_path / "tiles-indices-0.npy", np.asarray(indices, np.int64))
    np.save(tmp_path / "tiles-values-0.npy", np.asarray(values, np.float32))
    run = TilesRun(
        "bench",
        0,
        5,
        values=[str(tmp_path / "tiles-values-0.npy")],
        indices=[str(tmp_path / "tiles-indices-0.npy")],
        blocks=2,
        of_blocks=16,
    )
    return run, NumericsRun("bench", 0, files=[str(tmp_path / "reference-0.npy")])


def test_only_sampled_elements_are_compared_and_a_wrong_one_is_located(tmp_path):
    task = load_task(TASK)
    reference = np.arange(12, dtype=np.float32).reshape(3, 4)
    run, ref = _files(tmp_path, reference, [0, 5, 11], [0.0, 5.0, 11.0])
    passed = tiles_check(task, run, ref)
    assert passed.status == "pass" and passed.data["elements"] == 3
    assert passed.detail.startswith("2 of 16 output blocks sampled at production shapes")
    run, ref = _files(tmp_path, reference, [0, 5, 11], [0.0, 5.0, 99.0])
    failed = tiles_check(task, run, ref)
    assert failed.status == "fail" and "at [2, 3]" in failed.detail  # the output's own index
    run, ref = _files(tmp_path, reference, [0, 5], [0.0, np.nan])
    stale = tiles_check(task, run, ref)
    assert stale.status == "fail" and "NaN" in stale.detail


def test_a_run_that_decides_nothing_or_points_outside_the_output_never_passes(tmp_path):
    task = load_task(TASK)
    reference = np.ones((3, 4), np.float32)
    run, ref = _files(tmp_path, reference, [], [])
    assert tiles_check(task, run, ref).status == "skip"
    run, ref = _files(tmp_path, reference, [12], [1.0])
    assert tiles_check(task, run, ref).status == "fail"
    crashed = TilesRun("bench", 0, 5, error="JaxRuntimeError: out-of-bounds read")
    assert tiles_check(task, crashed, ref).status == "fail"
    unsampleable = TilesRun("bench", 0, 5, unsampleable="an output written by DMA")
    assert tiles_check(task, unsampleable, ref).status == "skip"
    over_budget = not_sampled(NumericsRun("bench", 0, error="over the CPU budget"))
    assert over_budget.status == "skip" and "over the CPU budget" in over_budget.detail
