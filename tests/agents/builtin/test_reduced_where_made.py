"""A column reduction reads the tiles it reduces where they are made: an element-wise stage whose
values feed only a reduction over rows (a variance's squared deviations) becomes that reduction's
stage instead of writing its tiles to HBM for the next one to read back. Written in several
styles (jnp.var, the mean of squares by hand, a sum divided by the count, a two-output
reference) and refused where the tiles are needed elsewhere; the generated kernels are judged by
the real harness."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.planner import finished, plan_program
from maxkernel_tui.agents.builtin.program import Probe, trace_program
from maxkernel_tui.agents.builtin.stages import ColumnReductionStage
from maxkernel_tui.kernels.loader import load_task
from tests.support.judged import judged_draft
from tests.support.task_folders import write_plain_source

_INPUTS = """
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.float32):
        rows, depth, cols = 256, 512, 384
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        x = jax.random.uniform(k1, (rows, depth), dtype=dtype)
        w = jax.random.normal(k2, (cols, depth), dtype=dtype) * 0.05
        b = jax.random.normal(k3, (cols,), dtype=dtype)
        return [x, w, b], []

"""

STYLES = {
    # KernelBench's training-mode batch norm: jnp.var finds its own mean
    "var_builtin": """
    def computation(x, w, b):
        y = x @ w.T + b
        mean = jnp.mean(y, axis=0)
        var = jnp.var(y, axis=0)
        return jax.nn.gelu((y - mean) / jnp.sqrt(var + 1e-5))
    """,
    # by hand, keepdims, rsqrt
    "mean_of_squares": """
    def computation(x, w, b):
        y = jnp.dot(x, w.T) + b[None, :]
        m = jnp.mean(y, axis=0, keepdims=True)
        v = jnp.mean(jnp.square(y - m), axis=0, keepdims=True)
        return jax.nn.relu((y - m) * jax.lax.rsqrt(v + 1e-5))
    """,
    # the deviations are also what is normalised: they feed the last stage too
    "deviations_reused": """
    def computation(x, w, b):
        y = jax.lax.dot_general(x, w, (((1,), (1,)), ((), ()))) + b
        d = y - jnp.sum(y, axis=0) / y.shape[0]
        v = jnp.sum(d * d, axis=0) / y.shape[0]
        return d / jnp.sqrt(v + 1e-5)
    """,
    # the squared deviations are a result of the program as well
    "squares_returned": """
    def computation(x, w, b):
        y = x @ w.T + b
        sq = (y - y.mean(axis=0)) ** 2
        return sq, sq.mean(axis=0)
    """,
}
# A convolution's batch norm: statistics per channel over the images and their pixels
_CONV_INPUTS = """
    import jax
    import jax.numpy as jnp


    def get_inputs(dtype=jnp.float32):
        k1, k2 = jax.random.split(jax.random.key(1))
        x = jax.random.uniform(k1, (4, 8, 18, 20), dtype=dtype)
        w = jax.random.normal(k2, (16, 8, 3, 3), dtype=dtype) * 0.1
        return [x, w], []

"""
STYLES["conv_batch_norm"] = """
    def computation(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")
        mean = y.mean(axis=(0, 2, 3), keepdims=True)
        var = ((y - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True)
        return (y - mean) / jnp.sqrt(var + 1e-5)
    """
MERGED = {"var_builtin": True, "mean_of_squares": True, "conv_batch_norm": True}
KEPT = {"deviations_reused": False, "squares_returned": False}


def _folder(root: Path, style: str) -> Path:
    inputs = _CONV_INPUTS if style.startswith("conv") else _INPUTS
    return write_plain_source(root, f"bn_{style}", 1e-2, inputs + STYLES[style])


_SQUARING = ("square", "integer_pow", "mul")


def _squaring_stage(plan):
    """The stage that squares the deviations (the last squaring of a tile before the end)."""
    (stage,) = [
        s
        for s in plan.stages
        if s.label != "element-wise" or s is not plan.stages[-1]
        if any(e.primitive in _SQUARING for e in s.eqns)
    ]
    return stage


@pytest.mark.parametrize(("style", "merged"), [*MERGED.items(), *KEPT.items()])
def test_squared_deviations_are_reduced_where_they_are_made(tmp_path, style, merged):
    # the sums as the reference writes them: a convolution's are otherwise summed per image in
    # its own kernel first (test_image_statistics.py); this plan stays the model's candidate
    program = trace_program(load_task(_folder(tmp_path, style)), Probe.EVERY)
    plan = plan_program(program, per_image=False)
    squaring = _squaring_stage(plan)
    if merged:
        # squared and summed over rows in one stage: no stage writes the squares to HBM
        assert isinstance(squaring, ColumnReductionStage)
        primitives = [e.primitive for e in squaring.eqns]
        assert primitives.index("sub") < primitives.index("reduce_sum")
        assert "element-wise" not in [s.label for s in plan.stages[:-1]]
    else:
        # the deviations (or their squares) are read elsewhere too: their stage writes them
        assert squaring.label == "element-wise"
        assert any(squaring.kinds[v].spans_rows for v in squaring.outputs)
    for stage in plan.stages:  # a column-reduction stage writes only what is left of its rows
        if isinstance(stage, ColumnReductionStage):
            assert all(finished(stage, stage.kinds[v]) for v in stage.outputs)


def test_the_merged_stage_computes_its_tiles_at_every_row_block(tmp_path):
    source = draft_kernel(load_task(_folder(tmp_path, "mean_of_squares"))).source
    body = source.split("def _stage3_body(")[1].split("\ndef ")[0]
    step, finish = body.split("def finish():")
    # the deviations and their squares before the accumulation, the division after the last block
    assert "acc0_ref[...] = acc0_ref[...] + jnp.sum(" in step
    assert " - " in step and ("square" in step or "integer_pow" in step or " * " in step)
    assert "acc0_ref[...]" in finish and "/" in finish


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
@pytest.mark.parametrize("style", list(STYLES))
def test_each_style_is_accepted_by_the_harness(harness, tmp_path, style):
    report = judged_draft(harness, load_task(_folder(tmp_path, style)), tmp_path)
    assert report.verdict == "accepted", report.failure
