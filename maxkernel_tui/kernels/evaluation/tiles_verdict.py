"""The `tiles` check: a kernel's sampled production tiles against the reference's outputs at
production shape, in the harness's process. NumPy only, no jax.

The candidate's process saved, per program output, the values its sampled output blocks decide
and their flat indices (evaluation/production_tiles.py); the reference's outputs come from the
reference process (kept in the cache, computed once per task and seed). Only those elements are
compared, with the production configuration's tolerance.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from maxkernel_tui.kernels.evaluation.compare import compare_arrays
from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, TilesRun
from maxkernel_tui.kernels.evaluation.report import FAIL, PASS, SKIP, TILES, Check
from maxkernel_tui.kernels.task import Task


def not_sampled(reference: NumericsRun) -> Check:
    """No tiles: the reference's production outputs could not be had (over the CPU budget, or
    the reference failed there)."""
    return Check(TILES, SKIP, f"production tiles not run: {reference.error}")


def tiles_check(task: Task, run: TilesRun, reference: NumericsRun | None) -> Check:
    label = f"{run.config} inputs seed {run.input_seed}, sample seed {run.sample_seed}"
    data = {
        "config": run.config,
        "input_seed": run.input_seed,
        "sample_seed": run.sample_seed,
        "blocks": run.blocks,
        "of_blocks": run.of_blocks,
        "kernels": run.kernels,
    }
    seconds = round(run.seconds, 3)
    if run.unsampleable is not None:
        detail = f"production tiles not run: {run.unsampleable}"
        return Check(TILES, SKIP, detail, seconds, data)
    if run.error is not None or run.values is None or run.indices is None:
        detail = f"{label}: the kernel failed on sampled production tiles: {run.error}"
        return Check(TILES, FAIL, detail, seconds, data)
    if reference is None or reference.files is None:
        why = reference.error if reference is not None else "no answer"
        return Check(TILES, SKIP, f"production tiles not compared: the reference failed: {why}")
    if len(reference.files) != len(run.values):
        detail = f"{label}: {len(run.values)} outputs instead of {len(reference.files)}"
        return Check(TILES, FAIL, detail, seconds, data)
    tolerance = task.tolerance(run.config)
    compared = 0
    worst = None
    for values_file, indices_file, reference_file in zip(
        run.values, run.indices, reference.files, strict=True
    ):
        indices = np.load(indices_file, allow_pickle=False)
        values = np.load(values_file, allow_pickle=False)
        if values.shape != indices.shape:
            return Check(TILES, FAIL, f"{label}: malformed tile files", seconds, data)
        # memory-mapped: only the sampled elements of a large reference are read
        expected = np.load(reference_file, mmap_mode="r", allow_pickle=False).reshape(-1)
        if indices.size and (indices.min() < 0 or indices.max() >= expected.size):
            return Check(TILES, FAIL, f"{label}: tile indices outside the output", seconds, data)
        comparison = compare_arrays(values, np.asarray(expected[indices]), tolerance)
        if comparison.worst_index:  # an index into the sample: say where in the output it is
            shape = np.load(reference_file, mmap_mode="r", allow_pickle=False).shape
            where = np.unravel_index(int(indices[comparison.worst_index[0]]), shape)
            comparison = replace(comparison, worst_index=tuple(int(i) for i in where))
        if not comparison.ok:
            detail = (
                f"{label}: wrong numerics at production shapes on sampled output tiles "
                f"(atol {tolerance.atol:g}, rtol {tolerance.rtol:g}): {comparison.describe()}"
            )
            return Check(TILES, FAIL, detail, seconds, data)
        compared += int(indices.size)
        if worst is None or comparison.max_abs > worst.max_abs:
            worst = comparison
    data["elements"] = compared
    if compared == 0 or worst is None:
        detail = (
            f"{label}: no output element is decided by the sampled blocks alone (the XLA after "
            "the kernels mixes every block): production shapes not verified"
        )
        return Check(TILES, SKIP, detail, seconds, data)
    detail = (
        f"{run.blocks} of {run.of_blocks} output blocks sampled at production shapes ({label}), "
        f"{compared} elements within tolerance; {worst.describe()}"
    )
    return Check(TILES, PASS, detail, seconds, data)
