"""The built-in agent's plans and the files it writes, without running them (the harness tests
are in test_generated_kernels.py)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from maxkernel_tui.agents.builtin import CannotPlan, draft_kernel, plan_task
from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.attention import recognise_attention
from maxkernel_tui.agents.builtin.autotune import autotune, estimate_source
from maxkernel_tui.agents.builtin.grouped import GroupedFamily
from maxkernel_tui.agents.builtin.pieces import function_source
from maxkernel_tui.agents.builtin.planner import plan_program
from maxkernel_tui.agents.builtin.program import Probe, trace_program
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.kernels.evaluation.static.checks import static_problems
from maxkernel_tui.kernels.loader import find_task, load_task
from tests.support.unplannable import write_sorting_task


@pytest.mark.parametrize(
    ("task_id", "families"),
    [
        ("41k", ["matmul + element-wise epilogue"]),
        ("38k", ["matmul + row-wise epilogue", "multi-stage (matmul+row-wise)"]),
        ("12p", ["row-wise reduction"]),
        ("14p", ["batched matmul"]),
        (  # gate and up projections share the rows, or not (the plain plan)
            "9p",
            ["multi-stage (matmul+matmul)", "multi-stage (matmul+matmul+matmul)"],
        ),
        (
            "40k",
            ["multi-stage (matmul+element-wise)", "multi-stage (matmul+row-wise+element-wise)"],
        ),
        ("2p", ["attention"]),
        # The batch axis of the pair matmul is the operands' last: XLA lays them out first.
        (  # written in XLA's layout for its result, or NCHW
            "18k",
            [
                "convolution written pixels-major + epilogue",
                "convolution (implicit GEMM) + epilogue",
            ],
        ),
        (
            "17p",
            [
                # the four gated projections of the same rows in one stage, or not
                "multi-stage (element-wise+matmul+batched matmul+row-wise+matmul+matmul)",
                "multi-stage (element-wise+matmul+matmul+matmul+matmul+batched "
                "matmul+row-wise+matmul+matmul)",
            ],
        ),
        ("5p", ["attention"]),
        ("11p", [GroupedFamily.GROUPED_MATMUL.value]),  # cumsum, windows gathered and scattered
        ("10p", [GroupedFamily.ROUTED_MOE.value]),  # top_k, experts run densely
        # decayed causal scans: a per-head table captured as a numpy constant, a cumsum prologue
        ("15p", ["decayed scan (chunk pairs)"]),
        ("16p", ["decayed scan (chunk pairs)"]),
        ("3p", ["MLA (projections + RoPE + flash attention)"]),  # attention between projections
        (
            "31k",
            # the squared deviations reduced where they are made
            ["multi-stage (matmul+column-reduction+column-reduction+element-wise)"],
        ),
        (
            "13p",
            [
                "multi-stage (matmul+column-reduction)",
                "multi-stage (matmul+row-wise+column-reduction)",
            ],
        ),
    ],
)
def test_families_are_recognised_from_the_jaxpr(suite_tasks, task_id, families):
    assert [plan.family for plan in plan_task(find_task(task_id, suite_tasks))] == families


def test_what_it_cannot_plan_it_says_plainly(tmp_path):
    with pytest.raises(CannotPlan, match="uses `sort`"):
        plan_task(load_task(write_sorting_task(tmp_path)))


def test_the_file_keeps_the_candidate_contract(suite_tasks):
    source = draft_kernel(find_task("45k", suite_tasks), tune=False).source
    assert static_problems(source) == []
    assert "interpret" not in source and "lambda" not in source  # TPU kernels, named index maps
    for expected in (
        "BLOCK_ROWS = ",
        "pl.when(k == 0)",
        "pl.num_programs(depth_axis) - 1",
        "def _matmul_stage(",
        '"arbitrary"',
        "pltpu.VMEM((tm, tn), jnp.float32)",
        "vmem_limit_bytes=limit",
        "def _lhs_block(i, j, k):",
    ):
        assert expected in source
    # The tunables in one place: a `# Tunables` line directly followed by `UPPER = int` lines.
    assert re.search(
        r"^# Tunables.*\nBLOCK_ROWS = \d+\nBLOCK_COLS = \d+\nBLOCK_DEPTH = \d+\n",
        source,
        re.MULTILINE,
    )


def test_a_renamed_copy_gets_the_same_kernel(suite_tasks, renamed_task):
    original = draft_kernel(find_task("45k", suite_tasks), tune=False).source
    renamed = draft_kernel(renamed_task, tune=False).source
    assert renamed == original
    assert "45k" not in original and "GroupNorm" not in original


def test_autotune_picks_the_best_estimate_that_fits(suite_tasks):
    task = find_task("41k", suite_tasks)
    plan = plan_task(task)[0]
    assert plan.knobs == ("block_rows", "block_cols", "block_depth")
    start = Tunables(128, 256, 256)
    result = autotune(plan.render, task, start, plan.knobs)
    assert result.estimate.fits_vmem
    assert result.estimate.seconds <= estimate_source(plan.render(start), task).seconds
    assert result.estimate.seconds == min(t.estimate.seconds for t in result.trials if t.estimate)
    assert len(result.trials) <= 12  # one knob at a time, not the whole grid


def test_attention_is_read_from_the_program(suite_tasks):
    grouped = find_task("2p", suite_tasks)  # (batch, seq, heads, dim), 4 query heads per key head
    # The flash kernel reads one sequence length: queries and keys are as long, by value (the
    # dataflow ties them only through the mask's iota, whose length is a Python int).
    spec = recognise_attention(trace_program(grouped, Probe.BY_VALUE), grouped)
    assert (spec.query, spec.key, spec.value, spec.bias) == (0, 1, 2, None)
    # The scale is 1/sqrt(head_dim), read from the shapes (rounded to bf16 in the kernel).
    assert spec.seq_first and spec.causal and (spec.scale, spec.scale_per_dim) == (1.0, True)
    assert spec.scale_at(128) == 128**-0.5
    biased = find_task("5p", suite_tasks)
    assert recognise_attention(trace_program(biased, Probe.BY_VALUE), biased).bias == 3


def test_sizes_that_only_coincide_are_read_where_they_live(suite_tasks):
    # 18k's out channels and height are 128 at bench and 32 at check shapes: the file must read
    # the channel count from the weight, or it breaks wherever the two differ; the output's
    # height and width are the image's less the weight's taps, as the convolution makes them.
    source = draft_kernel(find_task("18k", suite_tasks), tune=False).source
    assert "conv_bias.reshape(1, weight_dim0)" in source
    out_height, out_width = (f"x_dim{a}_minus_weight_dim{a}_plus1" for a in (2, 3))
    assert f"    {out_height} = x_dim2 - weight_dim2 + 1\n" in source
    # written pixels-major, back to NCHW after the kernel
    back = f"stage1_out.reshape({out_height}, {out_width}, x_dim0, weight_dim0), (2, 3, 0, 1))"
    assert f"jnp.transpose({back}" in source


@pytest.mark.parametrize(
    ("task_id", "pieces", "call"),
    [
        ("2p", [parts.FLASH_ATTENTION], "    return _flash_attention(query, key, value, "),
        (
            "18k",
            [parts.PIXELS_MAJOR_CONV_STAGE],
            "stage1_out = _pixels_major_conv_stage(x, weight, ",
        ),
        (
            "31k",  # batch statistics: column reductions between a matmul and row-wise stages
            [parts.MATMUL_STAGE, parts.ROWWISE_STAGE],
            "accumulators=(('col', 0.0),)",
        ),
        ("41k", [parts.MATMUL_STAGE], "stage1_out = _matmul_stage(x, weight, "),
        ("11p", [parts.GROUPED_MATMUL], "_grouped_matmul(lhs, (rhs,), group_sizes, "),
        (
            "10p",
            [parts.GROUPED_MATMUL, parts.ROUTED_MOE],
            "_routed_moe(x, router, gate_k, up_k, down_k, 2, grouped_matmul=_grouped_matmul,",
        ),
        # a row sum of the matmul's result: running statistics across column blocks
        ("36k", [parts.RUNNING_STAGE], "stage1_out = _running_matmul_stage(x, weight, "),
    ],
)
def test_the_file_is_its_family_module_called_with_the_tasks_parameters(
    suite_tasks, task_id, pieces, call
):
    plan = plan_task(find_task(task_id, suite_tasks))[0]
    source = plan.render(plan.start)
    written = source
    for function in (f for piece in (parts.COMMON, *pieces) for f in piece):
        copied = function_source(function)
        assert copied in source  # whole, exactly as written in pieces/ and tested there
        written = written.replace(copied, "")
    assert call in written
    # Everything of the kernel proper comes from the module: what is written for the task is
    # only the stages' bodies and epilogues, and computation() calling the module.
    for kernel_word in ("pallas_call", "BlockSpec", "program_id", "pl.when", "VMEM("):
        assert kernel_word not in written
    assert re.search(r"^# Tunables.*\n(?:BLOCK_[A-Z]+ = \d+\n)+", source, re.MULTILINE)


@pytest.mark.parametrize(
    ("task_id", "statistics"),
    [
        ("36k", ["sum"]),  # sigmoid, then a row sum
        ("24k", ["max", "rescaled sum"]),  # logsumexp: a running max and a rescaled sum
        ("49k", ["max"]),  # the max of group means: groups stay inside a column block
        ("13p", ["max", "rescaled sum", "pick"]),  # cross-entropy: logsumexp and the label's logit
        ("50k", None),  # a softmax leaves the kernel whole: rows are needed whole
        ("42k", None),  # a row max subtracted from every element: a tile-sized result
    ],
)
def test_a_row_reduced_epilogue_is_planned_with_running_statistics(
    suite_tasks, task_id, statistics
):
    plan = _first_plan(find_task(task_id, suite_tasks))
    found = [[str(s.kind) for s in r.statistics] for r in plan.running.values()]
    assert found == ([statistics] if statistics else [])


def _first_plan(task):
    """The stage plan as plan_task finds it: sizes told apart at the probe where they can be."""
    for probe in (Probe.EVERY, Probe.VARYING):
        try:
            return plan_program(trace_program(task, probe))
        except CannotPlan:
            continue
    return plan_program(trace_program(task, Probe.BY_VALUE))


def test_the_fuse_epilogue_tunable_switches_to_the_split_plan(suite_tasks):
    fused, split = plan_task(find_task("36k", suite_tasks))
    assert fused.start.fuse_epilogue and not split.start.fuse_epilogue
    unfused = fused.render(replace(fused.start, fuse_epilogue=False))
    assert "_running_matmul_stage(" in fused.render(fused.start)
    assert "_running_matmul_stage(" not in unfused
    assert unfused == split.render(replace(fused.start, fuse_epilogue=False))
