"""Real kernels measured at production and check shapes (kernel_work.py): cheats that differ
only at production shapes are rejected for their reason, an honest size-dependent block choice
and the suite's experts pass. In-process jax tracing; one harness run end to end."""

from pathlib import Path

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import find_task, load_task
from maxkernel_tui.kernels.report.reasons import (
    Agreement,
    Coverage,
    Defences,
    Finding,
    MatmulWork,
    Reason,
)

# imports jax, traces the suite's experts at production shapes (about 20 s)
pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[2] / "data" / "production"


def _findings(kernel: Path, task):
    from maxkernel_tui.kernels import reference_runtime as runtime
    from maxkernel_tui.kernels.evaluation.work import kernel_work, production_checks

    reference = runtime.load_reference(task)
    candidate = runtime.load_candidate(task, reference, kernel)

    def at(config):
        specs, static = runtime.input_specs(task, reference, config)
        return kernel_work.measure_shapes(
            config,
            lambda *d: candidate.computation(*d, *static),
            lambda *d: reference.computation(*d, *static),
            specs,
        )

    return production_checks.judge(at("bench"), at("check"), on_tpu=False)


def test_kernels_that_cheat_only_at_production_shapes_are_rejected_and_honest_ones_pass(
    suite_tasks,
):
    task = load_task(DATA / "small_gemm")
    honest = _findings(DATA / "honest_blocks.py", task)
    assert honest.failure is None
    assert {d.name: d.outcome for d in honest.defences}["numerics"] == "scheduled"
    cheap = _findings(DATA / "cheap_body_above_size.py", task).failure
    assert cheap.name == "work" and cheap.finding == Finding.NO_KERNEL_WORK
    stale = {d.name: d for d in _findings(DATA / "stale_rows_above_size.py", task).defences}
    # half the grid is also half the work the reference needs: both defences say so
    assert stale["coverage"].outcome == "failed" and stale["coverage"].figures == Coverage(0.5)
    work = stale["work"].figures
    assert stale["work"].outcome == "failed" and isinstance(work, MatmulWork)
    assert work.flops / work.needed == pytest.approx(0.5)
    for expert_task in ("8p", "1p", "11p"):
        expert = find_task(expert_task, suite_tasks)
        assert _findings(expert.expert_path, expert).failure is None, expert_task


def test_the_harness_reports_the_production_defences_and_runs_affordable_production_shapes():
    task = load_task(DATA / "small_gemm")
    options = EvalOptions(seeds=1)
    with Harness() as harness:
        stale = harness.evaluate(
            KernelSource.read(DATA / "stale_rows_above_size.py"), task, options
        )
        honest = harness.evaluate(KernelSource.read(DATA / "honest_blocks.py"), task, options)
    assert stale.failure.name == "production" and stale.failure.reason == Reason.DEFENCES_BROKEN
    assert isinstance(stale.failure.figures, Defences)
    failed = {d.name for d in stale.failure.figures.defences if d.outcome == "failed"}
    assert "coverage" in failed  # the stale memory
    assert honest.verdict == "accepted", honest.failure
    checks = {c.name: c for c in honest.checks}
    defences = checks["production"].figures
    assert isinstance(defences, Defences)
    assert ("numerics", "scheduled") in {(d.name, d.outcome) for d in defences.defences}
    numerics = checks["numerics"].figures
    assert isinstance(numerics, Agreement)
    assert "bench" in {r.config for r in numerics.runs}  # production shapes ran in interpret mode
