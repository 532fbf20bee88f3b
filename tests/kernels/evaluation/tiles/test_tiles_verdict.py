"""The tiles check compares only the sampled elements with the reference's production outputs
there (read from whole outputs, or as the reference worker computed them at those indices), says
where a wrong one is, and never lets a run that decided nothing pass. NumPy only."""

import numpy as np
import pytest

from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, TilesRun
from maxkernel_tui.kernels.evaluation.tiles.verdict import (
    expected_values,
    not_sampled,
    tiles_check,
)
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.reasons import Reason, Said, TilesFigures
from tests.support.gemm_relu_variants import TASK


def _files(tmp_path, reference, indices, values, *, at_indices=False):
    """The candidate's run, and what the reference gives at its indices: its whole output read
    there, or (`at_indices`) the values the reference worker computed there."""
    indices = np.asarray(indices, np.int64)
    np.save(tmp_path / "tiles-indices-0.npy", indices)
    np.save(tmp_path / "tiles-values-0.npy", np.asarray(values, np.float32))
    run = TilesRun(
        "bench",
        0,
        5,
        values=[str(tmp_path / "tiles-values-0.npy")],
        indices=[str(tmp_path / "tiles-indices-0.npy")],
        blocks=2,
        of_blocks=16,
        shapes=[list(reference.shape)],
    )
    if at_indices:
        np.save(tmp_path / "expected-0.npy", reference.reshape(-1)[indices])
        made = NumericsRun("bench", 0, files=[str(tmp_path / "expected-0.npy")], at_indices=True)
    else:
        np.save(tmp_path / "reference-0.npy", reference)
        made = NumericsRun("bench", 0, files=[str(tmp_path / "reference-0.npy")])
    return run, expected_values(made, run.indices)


@pytest.mark.parametrize("at_indices", [False, True], ids=["whole", "at_indices"])
def test_only_sampled_elements_are_compared_and_a_wrong_one_is_located(tmp_path, at_indices):
    task = load_task(TASK)
    reference = np.arange(12, dtype=np.float32).reshape(3, 4)
    run, want = _files(tmp_path, reference, [0, 5, 11], [0.0, 5.0, 11.0], at_indices=at_indices)
    passed = tiles_check(task, run, want)
    assert passed.status == "pass" and passed.reason == Reason.TILES_SAMPLED
    assert isinstance(passed.figures, TilesFigures)
    assert (passed.figures.elements, passed.figures.blocks, passed.figures.of_blocks) == (3, 2, 16)
    run, want = _files(tmp_path, reference, [0, 5, 11], [0.0, 5.0, 99.0], at_indices=at_indices)
    failed = tiles_check(task, run, want)
    assert failed.status == "fail" and failed.reason == Reason.TILES_OUTSIDE_TOLERANCE
    assert isinstance(failed.figures, TilesFigures) and failed.figures.comparison is not None
    assert failed.figures.comparison.worst_index == (2, 3)  # the output's own index
    run, want = _files(tmp_path, reference, [0, 5], [0.0, np.nan], at_indices=at_indices)
    stale = tiles_check(task, run, want)
    assert stale.status == "fail" and isinstance(stale.figures, TilesFigures)
    assert stale.figures.comparison is not None
    assert stale.figures.comparison.reason == Reason.NON_FINITE


def test_a_run_that_decides_nothing_or_points_outside_the_output_never_passes(tmp_path):
    task = load_task(TASK)
    reference = np.ones((3, 4), np.float32)
    run, want = _files(tmp_path, reference, [], [])
    assert tiles_check(task, run, want).status == "skip"
    with pytest.raises(ValueError, match="outside the output"):
        _files(tmp_path, reference, [12], [1.0])
    run, want = _files(tmp_path, reference, [1, 2], [1.0, 1.0])
    short = [want[0][:1]]  # an answer that does not match the sample is malformed, not a pass
    assert tiles_check(task, run, short).status == "fail"
    crashed = TilesRun("bench", 0, 5, error="JaxRuntimeError: out-of-bounds read")
    assert tiles_check(task, crashed, None).status == "fail"
    unsampleable = TilesRun("bench", 0, 5, unsampleable="an output written by DMA")
    assert tiles_check(task, unsampleable, None).status == "skip"
    no_reference = tiles_check(task, run, "over the CPU budget")
    assert no_reference.status == "skip" and no_reference.reason == Reason.TILES_REFERENCE_FAILED
    assert no_reference.figures == Said("over the CPU budget")
    no_inputs = not_sampled("get_inputs failed at production shapes")
    assert no_inputs.status == "skip" and no_inputs.reason == Reason.TILES_NOT_RUN
