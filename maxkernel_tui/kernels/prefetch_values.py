"""The scalar operands (dynamic grid bounds, scalar-prefetch arrays: page tables, group offsets,
work lists) a traced kernel program's pallas_calls get at a task's production inputs, for the
performance model: computed by the program's own XLA steps before each kernel, from the few
inputs they read (kernels/perf/flat_program.py). The inputs are made once per task and kept
while the same task is estimated again (the autotuner tries many tilings). Imports jax.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import jax
import numpy as np

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.perf.flat_program import (
    NotFlat,
    ScalarOperands,
    flatten,
    has_scalar_operands,
    scalar_inputs,
    scalar_operands,
)
from maxkernel_tui.kernels.task import Task

# (task folder, configuration) -> the input leaves scalar operands were computed from, by
# position; one task at a time
_held: dict[tuple[str, str], dict[int, np.ndarray]] = {}


def kernel_scalars(
    traced: Any, task: Task, reference: ModuleType, config: str
) -> list[ScalarOperands] | None:
    """Each pallas_call's scalar operands at `config`'s inputs (the order analyze() walks the
    calls); None where no call takes any, or where they cannot be computed before the kernels
    run (a kernel computes them, or a kernel sits in a loop)."""
    try:
        flat = flatten(traced)
        if not has_scalar_operands(flat):
            return None
        positions = scalar_inputs(flat)
        held = _inputs(task, reference, config, positions)
        return scalar_operands(flat, [held.get(p) for p in range(len(flat.inputs))])
    except NotFlat:
        return None


def _inputs(
    task: Task, reference: ModuleType, config: str, positions: list[int]
) -> dict[int, np.ndarray]:
    key = (str(task.folder), config)
    held = _held.get(key, {})
    if not set(positions) <= held.keys():
        dynamic, _ = runtime.make_inputs(task, reference, config)
        leaves = jax.tree.leaves(dynamic)
        held = {p: np.asarray(leaves[p]) for p in positions}
        _held.clear()
        _held[key] = held
    return held
