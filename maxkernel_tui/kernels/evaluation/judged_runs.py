"""The numerics runs of a check, the candidate's against the reference's: outputs first, then
each requested gradient, each with its own tolerance. NumPy (through compare.py), no jax; the
harness imports this only once it judges, not at the UI's start-up."""

from __future__ import annotations

from maxkernel_tui.kernels.evaluation.compare import compare_files
from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, Run
from maxkernel_tui.kernels.report.checks import FAIL, PASS, Check
from maxkernel_tui.kernels.report.reasons import Agreement, Reason, RunFigures
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.task import Task


def _gradient_figures(
    task: Task, config: str, seed: int, candidate: NumericsRun, reference: NumericsRun
) -> list[RunFigures]:
    """Each requested gradient of one run against the reference's, with the task's gradient
    tolerance there; a missing one is the kernel's failure (its backward gave none)."""
    if not task.gradients:
        return []
    tolerance = task.gradient_tolerance(config)
    got, wanted = candidate.gradient_files or [], reference.gradient_files or []
    if len(got) != len(task.gradients) or len(wanted) != len(task.gradients):
        missing = "the backward gave no gradients" if len(got) != len(task.gradients) else ""
        return [RunFigures(config, seed, error=missing or "the reference gave no gradients")]
    return [
        RunFigures(
            config,
            seed,
            tolerance.atol,
            tolerance.rtol,
            compare_files([mine], [theirs], tolerance),
            gradient=name,
        )
        for name, mine, theirs in zip(task.gradients, got, wanted, strict=True)
    ]


def compare_runs(
    name: CheckName,
    task: Task,
    runs: list[Run],
    candidate_runs: dict[Run, NumericsRun],
    reference_runs: dict[Run, NumericsRun],
) -> Check:
    agreed = []
    for config, seed in runs:
        candidate = candidate_runs.get((config, seed))
        reference = reference_runs[(config, seed)]
        if candidate is None:
            return Check(name, FAIL, Reason.NO_OUTPUT, RunFigures(config, seed))
        if candidate.error is not None or candidate.files is None:
            failed = RunFigures(config, seed, error=candidate.error)
            return Check(name, FAIL, Reason.KERNEL_FAILED, failed)
        if reference.error is not None or reference.files is None:
            failed = RunFigures(config, seed, error=reference.error)
            return Check(name, FAIL, Reason.REFERENCE_RUN_FAILED, failed)
        if candidate.races:
            return Check(name, FAIL, Reason.RACE_DETECTED, RunFigures(config, seed))
        tolerance = task.tolerance(config)
        comparison = compare_files(candidate.files, reference.files, tolerance)
        compared = RunFigures(config, seed, tolerance.atol, tolerance.rtol, comparison)
        if not comparison.ok:
            return Check(name, FAIL, comparison.reason, compared)
        agreed.append(compared)
        for figures in _gradient_figures(task, config, seed, candidate, reference):
            if figures.error is not None:
                return Check(name, FAIL, Reason.KERNEL_FAILED, figures)
            if figures.comparison is not None and not figures.comparison.ok:
                return Check(name, FAIL, Reason.GRADIENT_OUTSIDE_TOLERANCE, figures)
            agreed.append(figures)
    # the first configuration is production's: a task with no other (a plain folder whose
    # inputs have no smaller sizes) is compared there in full, on its fixed inputs
    at_production = any(config == task.configs[0] for config, _ in runs)
    return Check(
        name,
        PASS,
        Reason.WITHIN_TOLERANCE,
        Agreement(tuple(agreed)),
        production_shapes=at_production,
    )
