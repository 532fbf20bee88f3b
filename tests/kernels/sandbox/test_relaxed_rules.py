"""The routes the static rules no longer refuse, each with the static rules switched off so that
only the layer now meant to stop it stands in the way: the interpreter's object graph walked to
`os.system` (the OS sandbox: no `execve`), a branch per platform in the program (the judge
refuses its `platform_index`), state kept across the tracer's calls (the run at production
shapes).
The rest are in test_hostile_kernels.py (files, environments, pickles, sockets, processes,
private modules, `__import__`, `open`) and test_tracer_lies.py (the harness patched from the
kernel's process); a branch on the platform in Python is in test_production_verdicts.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.report.reasons import Reason
from maxkernel_tui.kernels.task import Task
from tests.support import hostile_kernels as hostile

pytestmark = pytest.mark.slow  # tracer, judge and reference jax worker processes

QUICK = EvalOptions(seeds=1, timeout=120)


def _evaluate(harness: Harness, source: str, task: Task, tmp_path: Path) -> EvalReport:
    kernel = tmp_path / "kernels" / "relaxed.py"
    kernel.parent.mkdir(exist_ok=True)
    kernel.write_text(source)
    return harness.evaluate(KernelSource.read(kernel), task, QUICK)


def test_the_object_graph_walked_to_os_starts_nothing(harness, task, tmp_path):
    marker = tmp_path / "dunder-command-ran"
    report = _evaluate(
        harness, hostile.fill(hostile.DUNDER_WALK, marker=str(marker)), task, tmp_path
    )
    assert not marker.exists()
    assert report.verdict == "rejected"
    tried = [c.figures for c in report.checks if c.reason == Reason.SANDBOX_REFUSED]
    assert tried and "run a shell command" in tried[0].text, report.checks


WRONG_NUMERICS = (Reason.OUTSIDE_TOLERANCE, Reason.NON_FINITE, Reason.OUTPUT_MISMATCH)


def test_a_branch_per_platform_in_the_program_is_refused_by_the_judge(harness, task, tmp_path):
    report = _evaluate(harness, hostile.PLATFORM_BRANCH, task, tmp_path)
    assert report.verdict == "rejected"
    assert report.failure is not None and report.failure.name == "trace", report.checks
    assert report.failure.reason == Reason.UNTRACEABLE
    assert "a branch per platform" in report.failure.figures.text


def test_state_kept_across_the_tracers_calls_is_caught(harness, task, tmp_path):
    """Wrong at production shapes only (its first trace): the judge runs the program traced
    there (this task's production shapes are small enough to run whole) and it fails."""
    report = _evaluate(harness, hostile.STATE_ACROSS_TRACES, task, tmp_path)
    assert report.verdict == "rejected", report.checks
    assert report.failure is not None and report.failure.name == "numerics", report.failure
    assert report.failure.reason in WRONG_NUMERICS, report.failure
    assert report.failure.figures.config == "bench"
