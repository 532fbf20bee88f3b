"""Kernels the built-in agent writes, judged by the real harness: static rules, trace, TPU
lowering and v5e compile at bench shapes, numerics on check and held-out shapes.

One task per family and shape of plan, our own task from outside the suite, and a suite task
under a meaningless name; benchmarks/builtin_agent_coverage.py covers the whole suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.task import Task
from tests.support.judged import judged_draft

# The agent traces with jax in this process; the harness then starts workers (fork + exec at once).
pytestmark = [pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"), pytest.mark.slow]


def accepted(harness: Harness, task: Task, folder: Path, *, tune: bool) -> None:
    report = judged_draft(harness, task, folder, tune=tune)
    assert report.verdict == "accepted", (task.task_id, report.failure)


@pytest.mark.parametrize(
    ("task_id", "tune"),
    [
        ("8p", False),  # bf16 GEMM
        pytest.param("14p", False, marks=pytest.mark.heavy),  # batched matmul
        ("12p", False),  # row-wise normalisation, no matmul
        pytest.param("19k", False, marks=pytest.mark.heavy),  # f32 GEMM, element-wise epilogue
        pytest.param(
            "38k", True, marks=pytest.mark.heavy
        ),  # the model splits the softmax epilogue into its own stage
        pytest.param(
            "40k", False, marks=pytest.mark.heavy
        ),  # groups of columns, then an outer broadcast in a second stage
        ("2p", False),  # attention: grouped query heads, (batch, seq, heads, dim) layout
        pytest.param(
            "31k", False, marks=pytest.mark.heavy
        ),  # batch statistics: reductions over rows in column-reduction stages
        # convolution as an implicit GEMM, instance norm over each output image: under
        # `-m coverage` only (61 s of a CI process; test_conv2d_folders.py and
        # test_pixels_major_planning.py judge convolution kernels in every run)
        pytest.param("22k", False, marks=[pytest.mark.heavy, pytest.mark.coverage]),
    ],
)
def test_suite_kernels_are_accepted(harness, suite_tasks, tmp_path, task_id, tune):
    accepted(harness, find_task(task_id, suite_tasks), tmp_path, tune=tune)


def test_our_own_task_outside_the_suite_is_accepted(harness, own_task, tmp_path):
    accepted(harness, own_task, tmp_path, tune=True)


def test_a_renamed_suite_task_is_accepted(harness, renamed_task, tmp_path):
    accepted(harness, renamed_task, tmp_path, tune=False)
