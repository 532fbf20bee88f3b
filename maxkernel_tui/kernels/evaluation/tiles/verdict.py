"""The `tiles` check: a kernel's sampled production tiles against the reference's outputs at
production shape, in the harness's process. NumPy only, no jax.

The candidate's process saved, per program output, the values its sampled output blocks decide
and their flat indices (evaluation/tiles/sampled_run.py); the reference process computes the
reference's outputs at those indices (by regions, evaluation/reference/slices.py, or whole, then
kept in the cache). Only those elements are compared, with the production configuration's
tolerance, and their error distribution is projected to the whole output (tiles/projection.py):
the verdict on precision does not rest on whether the sample met the worst element.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from maxkernel_tui.kernels.config_names import HELDOUT
from maxkernel_tui.kernels.evaluation.compare import compare_with_shares
from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, TilesRun
from maxkernel_tui.kernels.evaluation.tiles.projection import Projection, project
from maxkernel_tui.kernels.report.checks import (
    EDGE,
    FAIL,
    NUMERICS,
    PASS,
    SKIP,
    TILES,
    Check,
    EvalReport,
)
from maxkernel_tui.kernels.report.reasons import (
    NO_FIGURES,
    NotJudged,
    Reason,
    Said,
    TilesFigures,
)
from maxkernel_tui.kernels.report.status import CheckStatus
from maxkernel_tui.kernels.task import Task


def not_sampled(reason: str) -> Check:
    """No tiles: the production inputs could not be had (the task's get_inputs failed there)."""
    return Check(TILES, SKIP, Reason.TILES_NOT_RUN, Said(reason))


def expected_values(reference: NumericsRun, indices: list[str]) -> list[np.ndarray]:
    """The reference's outputs at the sample's flat indices, one array per output: as the
    reference worker computed them there, or read from its whole outputs (memory-mapped, so
    only the sampled elements of a large output are read)."""
    if reference.files is None:
        raise ValueError("no reference outputs")
    if reference.at_indices:
        return [np.load(path, allow_pickle=False) for path in reference.files]
    found = []
    for path, index_file in zip(reference.files, indices, strict=True):
        whole = np.load(path, mmap_mode="r", allow_pickle=False).reshape(-1)
        wanted = np.load(index_file, allow_pickle=False)
        if wanted.size and (wanted.min() < 0 or wanted.max() >= whole.size):
            raise ValueError("tile indices outside the output")
        found.append(np.asarray(whole[wanted]))
    return found


def tiles_check(
    task: Task,
    run: TilesRun,
    expected: list[np.ndarray] | str | None,
    *,
    device_compares: bool = False,
) -> Check:
    """The candidate's sampled values against the reference's there; `expected` is a string
    when the reference could not be had (why), None when it was not asked (the run failed).
    Precision is judged on each output's error distribution projected to its whole size
    (tiles/projection.py); `device_compares`: a TPU will compare the whole production output
    (timing/device_checks.py), so a projection over the tolerance is left to it."""
    sample = TilesFigures(
        run.config,
        run.input_seed,
        run.sample_seed,
        run.blocks,
        run.of_blocks,
        tuple(run.kernels),
        classes=run.classes,
        gradients=", ".join(run.gradients),
    )
    seconds = round(run.seconds, 3)

    def check(status: CheckStatus, reason: Reason, **figures: Any) -> Check:
        return Check(TILES, status, reason, replace(sample, **figures), seconds)

    if run.unsampleable is not None:
        return check(SKIP, Reason.TILES_NOT_RUN, text=run.unsampleable)
    if run.fault is not None:
        return check(FAIL, run.fault, text=str(run.error))
    if run.error is not None or run.values is None or run.indices is None:
        return check(FAIL, Reason.TILES_KERNEL_FAILED, text=str(run.error))
    if not isinstance(expected, list):
        why = Said(expected or "no answer")
        return Check(TILES, SKIP, Reason.TILES_REFERENCE_FAILED, why)
    if len(expected) != len(run.values):
        counts = {"outputs": len(run.values), "expected": len(expected)}
        return check(FAIL, Reason.TILES_OUTPUT_COUNT, **counts)
    # a backward's sample holds gradients: judged with their tolerance
    tolerance = (task.gradient_tolerance if run.gradients else task.tolerance)(run.config)
    bounds = {"atol": tolerance.atol, "rtol": tolerance.rtol}
    compared = 0
    worst = None
    projected: Projection | None = None
    undecided: list[str] = []  # gradients the sample decides no element of
    for number, (values_file, indices_file, want) in enumerate(
        zip(run.values, run.indices, expected, strict=True)
    ):
        # mapped: read once, into the comparison's chunks
        indices = np.load(indices_file, mmap_mode="r", allow_pickle=False)
        values = np.load(values_file, mmap_mode="r", allow_pickle=False)
        if values.shape != indices.shape or want.shape != indices.shape:
            return check(FAIL, Reason.TILES_MALFORMED)
        comparison, shares = compare_with_shares(values, want, tolerance)
        shape = run.shapes[number] if number < len(run.shapes) else None
        if comparison.worst_index and shape:  # an index into the sample: say where it is
            where = np.unravel_index(int(indices[comparison.worst_index[0]]), shape)
            comparison = replace(comparison, worst_index=tuple(int(i) for i in where))
        if not comparison.ok:
            named = {"gradients": run.gradients[number]} if run.gradients else {}
            return check(
                FAIL, Reason.TILES_OUTSIDE_TOLERANCE, comparison=comparison, **bounds, **named
            )
        compared += int(indices.size)
        if run.gradients and not indices.size:
            undecided.append(run.gradients[number])
        if worst is None or comparison.max_abs > worst.max_abs:
            worst = comparison
        size = math.prod(shape) if shape else int(indices.size)
        output = project(shares, size)
        if output.checked and (projected is None or output.share > projected.share):
            projected = output
    if compared == 0 or worst is None or projected is None:
        return check(SKIP, Reason.TILES_NONE_DECIDED, elements=compared)
    found = {
        "elements": compared,
        "comparison": worst,
        "projected": round(projected.share, 4),
        "projected_from": projected.checked,
        "of_elements": projected.total,
        "projected_over": projected.over,
        **bounds,
        **_decided_gradients(run, undecided),
    }
    if projected.share > 1.0:
        if device_compares:
            return check(SKIP, Reason.TILES_LEFT_TO_DEVICE, **found)
        return check(FAIL, Reason.TILES_PROJECTED_OUTSIDE, **found)
    return check(PASS, Reason.TILES_SAMPLED, **found)


def _decided_gradients(run: TilesRun, undecided: list[str]) -> dict[str, str]:
    """A backward's sample: the gradients it compared, and which it decided nothing of (a
    gradient summed over every block, as a norm's scale's, needs all of them)."""
    if not run.gradients:
        return {}
    compared = ", ".join(name for name in run.gradients if name not in undecided)
    if not undecided:
        return {"gradients": compared}
    text = (
        f"no element of the gradient of {', '.join(undecided)} is decided by the sampled blocks "
        "alone: checked at small shapes only"
    )
    return {"gradients": compared, "text": text}


def projected_outside(report: EvalReport) -> Check | None:
    """The tiles check's projection, as a failure, where it was left to the device's comparison
    of the whole production output and nothing compared that output (the timing on the TPU was
    busy or failed); None otherwise."""
    left = next((c for c in report.checks if c.reason == Reason.TILES_LEFT_TO_DEVICE), None)
    if left is None or any(c.production_shapes for c in report.checks):
        return None
    return Check(TILES, FAIL, Reason.TILES_PROJECTED_OUTSIDE, left.figures, left.seconds)


def unjudged(report: EvalReport) -> Check | None:
    """A failed check where the kernel's own tiles fit no derived configuration that ran and
    nothing compared its outputs at production shapes either (production tiles off, too large
    for memory, or their reference failed): no evidence, so no acceptance. A rejection that says
    so, not a finding of wrong numerics; None where some comparison passed."""
    unfit = [config for c in report.checks if (config := c.unfit_config) is not None]
    compared = (NUMERICS, HELDOUT, EDGE, TILES)
    if not unfit or any(c.status == PASS and c.name in compared for c in report.checks):
        return None
    # the device will compare the whole production output (projected_outside, where it does not)
    if any(c.reason == Reason.TILES_LEFT_TO_DEVICE for c in report.checks):
        return None
    tiles = next((c for c in report.checks if c.name == TILES), None)
    if tiles is None:
        return Check(NUMERICS, FAIL, Reason.NOT_JUDGED, NotJudged(tuple(unfit)))
    # a tiles check's figures are the sample's, or someone's words on why there is none
    figures = tiles.figures if isinstance(tiles.figures, Said | TilesFigures) else NO_FIGURES
    return Check(NUMERICS, FAIL, Reason.NOT_JUDGED, NotJudged(tuple(unfit), tiles.reason, figures))
