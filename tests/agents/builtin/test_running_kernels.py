"""Kernels the built-in agent writes with a running epilogue (statistics carried across column
blocks), run in TPU interpret mode at check shapes with column blocks small enough that every
row spans several, against the reference: a plain row sum, a logsumexp (running max and a
rescaled sum), maxima of group means, and a cross-entropy (a logsumexp and a picked label
with arithmetic between them)."""

from __future__ import annotations

import types

import jax
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin import plan_task
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import find_task

INTERPRET = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
SMALL = Tunables(block_rows=64, block_cols=128, block_depth=256)


def _running_source(task) -> str:
    plan = plan_task(task, choose_precision=False)[0]
    source = plan.render(SMALL)
    assert "_running_matmul_stage(" in source
    return source


@pytest.mark.slow
@pytest.mark.parametrize("task_id", ["36k", "24k", "49k", "13p"])
def test_a_running_epilogue_matches_the_reference_across_column_blocks(suite_tasks, task_id):
    task = find_task(task_id, suite_tasks)
    kernel = types.ModuleType("running_kernel")
    exec(compile(_running_source(task), "<running kernel>", "exec"), kernel.__dict__)
    reference = runtime.load_reference(task)
    dynamic, static, want = runtime.run_reference(task, reference, "check", seed=1)
    with pltpu.force_tpu_interpret_mode(INTERPRET):
        got = jax.block_until_ready(kernel.computation(*dynamic, *static))
    tolerance = task.tolerance("check")
    np.testing.assert_allclose(
        np.asarray(got, np.float32),
        np.asarray(want, np.float32),
        atol=tolerance.atol,
        rtol=tolerance.rtol,
    )
