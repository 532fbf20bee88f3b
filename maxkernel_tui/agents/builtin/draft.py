"""The built-in agent's one call: a task in, a complete candidate kernel file out (or a plain
"cannot plan this" and why). It reads only the reference's jaxpr, never the task's id or name.

Kernel plans come from the stage planner (matmuls with fused epilogues, row-wise and
element-wise stages, batched matmuls) or, when that has none, from the attention recogniser
(or, for attention between projections, the MLA recogniser).
The performance model picks among the plans and their tunables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from maxkernel_tui.agents.builtin.attention import recognise_attention
from maxkernel_tui.agents.builtin.attention_render import render_attention
from maxkernel_tui.agents.builtin.autotune import DEFAULT_TARGET, autotune, estimate_source
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.grouped import recognise_grouped
from maxkernel_tui.agents.builtin.grouped_render import KNOBS, render_grouped
from maxkernel_tui.agents.builtin.mla import recognise_mla
from maxkernel_tui.agents.builtin.mla_render import render_mla
from maxkernel_tui.agents.builtin.operand_precision import OperandPrecision, PrecisionChoice
from maxkernel_tui.agents.builtin.paged import PAGED_START, recognise_paged_attention
from maxkernel_tui.agents.builtin.paged_render import render_paged_attention
from maxkernel_tui.agents.builtin.pixels_major import PixelsMajorConvStage
from maxkernel_tui.agents.builtin.planner import Plan, plan_program
from maxkernel_tui.agents.builtin.precision import choose_precisions
from maxkernel_tui.agents.builtin.program import Probe, Program, trace_program
from maxkernel_tui.agents.builtin.render import render_kernel
from maxkernel_tui.agents.builtin.retention import recognise_retention
from maxkernel_tui.agents.builtin.retention_render import render_retention
from maxkernel_tui.agents.builtin.stages import MatmulStage, mxu_heads
from maxkernel_tui.agents.builtin.training import recognise_training
from maxkernel_tui.agents.builtin.training_estimate import estimate_training, tune_training
from maxkernel_tui.agents.builtin.training_render import (
    render_training,
    training_knobs,
    training_tunables,
)
from maxkernel_tui.agents.builtin.tunables import Tunables, default_tunables
from maxkernel_tui.kernels.evaluation.timing.measured_choice import Timer, device_timer
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.task import Task


@dataclass(frozen=True)
class KernelPlan:
    """One way to write the kernel: what it is, how to render it, which knobs matter, the
    operand precision of its matmuls, and the same kernel with the operands' own dtype (a
    debugger's fallback when the chosen precision fails the harness; None when it is the same)."""

    family: str
    render: Callable[[Tunables], str]
    knobs: tuple[str, ...]
    start: Tunables
    precision: PrecisionChoice | None = None
    as_reference: Callable[[Tunables], str] | None = None
    # The share of estimated time this plan must save over the others to be chosen: a fusion
    # that buys nothing leaves the simpler kernel (whose production tiles sample in less memory).
    must_save: float = 0.0


@dataclass(frozen=True)
class KernelDraft:
    source: str  # the kernel file
    family: str  # what the agent recognised, e.g. "matmul + row-wise epilogue"
    tunables: Tunables
    estimate: Estimate  # the performance model's, for `target`, at bench shapes
    chosen_by: str = "the performance model (estimated)"  # or the device timings (measured)
    precision: PrecisionChoice | None = None  # its matmuls' operand precision, and why


def plan_task(task: Task, *, choose_precision: bool = False) -> list[KernelPlan]:
    """The plans the agent would consider for `task`, preferred first; CannotPlan says plainly
    why there is none. Sizes are told apart at the probe first, every one, then only those that
    vary (program.py); a plan that needs coincident sizes equal (attention's query and key
    lengths) is looked for again with them tied.
    `choose_precision`: the matmuls' operand precision is chosen (precision.py: it runs the
    reference on the numerics configurations); without, the operands keep their own dtype."""
    for probe in (Probe.EVERY, Probe.VARYING):
        with contextlib.suppress(CannotPlan):
            return _plans(trace_program(task, probe), task, choose_precision)
    try:
        return _plans(trace_program(task, Probe.BY_VALUE), task, choose_precision)
    except CannotPlan as problem:  # read by structure what the stage planner cannot translate
        with contextlib.suppress(CannotPlan):
            return [grouped_plan(trace_program(task, strict=False), task)]
        spec = recognise_paged_attention(task, problem)  # gathers of pages by a table
        knobs = ("block_rows", "block_cols") if spec.ragged else ("block_cols",)
        render = partial(render_paged_attention, spec)
        return [KernelPlan(spec.family, render, knobs, PAGED_START)]


# What a plan whose matmuls share their rows must save, as a share of the plain plan's time.
SHARED_ROWS_MUST_SAVE = 0.02


def _plans(program: Program, task: Task, choose_precision: bool) -> list[KernelPlan]:
    if task.gradients:  # a training task: a custom_vjp kernel, or plainly none
        return [training_plan(program, task)]
    try:
        fused = plan_program(program)
    except CannotPlan as stage_problem:
        with contextlib.suppress(CannotPlan):
            return retention_plans(program)
        try:
            spec = recognise_attention(program, task)
        except CannotPlan as attention_problem:
            with contextlib.suppress(CannotPlan):  # attention between projections: MLA
                return [mla_plan(program, task)]
            # The more telling reason: the planner's, unless the program does look like attention.
            reason = (
                stage_problem
                if str(attention_problem).startswith("not attention")
                else attention_problem
            )
            raise reason from None
        return [
            KernelPlan(
                "attention",
                partial(render_attention, spec, program),
                ("block_rows", "block_cols"),
                default_tunables(narrow_dtype=True),
            )
        ]
    split = plan_program(program, split_rowwise=True)
    stage_plans = [fused] if len(split.stages) == len(fused.stages) else [fused, split]
    heads = mxu_heads(fused.stages)
    precision = (
        choose_precisions(task, len(heads), [bool(h.precision) for h in heads])
        if choose_precision
        else None
    )
    plans = [_stage_kernel_plan(plan, precision, split) for plan in stage_plans]
    if any(isinstance(s, MatmulStage) and s.siblings for s in fused.stages):
        # matmuls sharing their rows must save time to be chosen over the plain plan
        plans[0] = replace(plans[0], must_save=SHARED_ROWS_MUST_SAVE)
        unshared = plan_program(program, share=False)
        plans.append(_stage_kernel_plan(unshared, precision, unshared))
    if any(isinstance(s, PixelsMajorConvStage) for s in fused.stages):
        # the convolution written NCHW stays a candidate: the model chooses
        nchw = plan_program(program, pixels_major=False)
        plans.append(_stage_kernel_plan(nchw, precision, nchw))
        stage_plans.append(nchw)
    if any(plan.per_image for plan in stage_plans):
        # a convolution's batch statistics summed as the reference writes them (a kernel each
        # over the whole result) stay a candidate beside the per-image sums: the model chooses
        as_written = plan_program(program, pixels_major=False, per_image=False)
        plans.append(_stage_kernel_plan(as_written, precision, as_written))
    return plans


def draft_kernel(task: Task, *, tune: bool = True, target: str = DEFAULT_TARGET) -> KernelDraft:
    """With `tune`, every plan autotuned and the best estimate kept; without, the first plan at
    its default tunables."""
    return draft_candidates(task, tune=tune, target=target)[0]


def draft_candidates(
    task: Task, *, tune: bool = True, target: str = DEFAULT_TARGET, timer: Timer | None = None
) -> list[KernelDraft]:
    """One draft per plan (autotuned with `tune`; without, the first plan only, untuned), the
    best estimate first. CannotPlan when no plan has a tiling that fits. The autotune times its
    best few settings with `timer`, by default the TPU's when there is one."""
    drafts: list[tuple[float, KernelDraft]] = []
    problems = []
    timer = timer if timer is not None else (device_timer(task) if tune else None)
    for plan in plan_task(task, choose_precision=True)[: None if tune else 1]:
        if task.gradients:  # the model's forward and backward, against XLA's gradient
            try:
                tunables, found = (
                    tune_training(plan.render, task, plan.start, plan.knobs, target)
                    if tune
                    else (plan.start, estimate_training(plan.render(plan.start), task, target))
                )
            except CannotPlan as problem:
                problems.append(f"{plan.family}: {problem}")
                continue
            chosen_by = f"the {target} performance model, forward and backward (estimated)"
        elif tune:
            try:
                result = autotune(plan.render, task, plan.start, plan.knobs, target, timer)
            except CannotPlan as problem:  # this plan has no tiling that fits; another may
                problems.append(f"{plan.family}: {problem}")
                continue
            tunables, found, chosen_by = result.best, result.estimate, result.chosen_by
        else:
            tunables, found = plan.start, estimate_source(plan.render(plan.start), task, target)
            chosen_by = "not tuned: the plan's defaults (estimated)"
        draft = KernelDraft(
            plan.render(tunables), plan.family, tunables, found, chosen_by, plan.precision
        )
        drafts.append((found.seconds * (1 + plan.must_save), draft))
    if not drafts:
        raise CannotPlan("; ".join(problems))
    return [draft for _, draft in sorted(drafts, key=lambda ranked: ranked[0])]


def grouped_plan(program: Program, task: Task) -> KernelPlan:
    """A grouped matmul or a routed MoE (grouped.py), or CannotPlan."""
    spec = recognise_grouped(program, task)
    start = default_tunables(narrow_dtype=True)
    return KernelPlan(spec.family.value, partial(render_grouped, spec, program), KNOBS, start)


def training_plan(program: Program, task: Task) -> KernelPlan:
    """The family's forward and backward kernels joined by a custom_vjp (pieces/backward/),
    tuned on the model's forward-and-backward estimate (CannotPlan when no backward piece
    fits)."""
    spec = recognise_training(program, task)
    return KernelPlan(
        f"{spec.family} forward + backward (custom_vjp)",
        partial(render_training, spec, program),
        training_knobs(spec.family),
        training_tunables(spec.family),
    )


def retention_plans(program: Program, *, carried_state: bool = False) -> list[KernelPlan]:
    """A decayed causal scan (retention.py) over chunk pairs, query and key chunk lengths its
    knobs. With `carried_state`, where a fixed-size state carries the scan (spec.carries_state),
    also the one-pass form, preferred: it does ~1/13 of the quadratic form's matmul work at
    16p's bench shapes, and the harness's work floor (0.9x of the reference's matmul flops)
    refuses it, so the agent does not propose it by default
    (benchmarks/builtin_scan_forms.py estimates both)."""
    spec = recognise_retention(program)
    pairs = KernelPlan(
        "decayed scan (chunk pairs)",
        partial(render_retention, spec, program, False),
        ("block_rows", "block_cols"),
        default_tunables(narrow_dtype=True),
    )
    if not (carried_state and spec.carries_state):
        return [pairs]
    carried = KernelPlan(
        "decayed scan (carried state)",
        partial(render_retention, spec, program, True),
        ("block_rows",),
        replace(default_tunables(narrow_dtype=True), block_rows=256),
    )
    return [carried, pairs]


def mla_plan(program: Program, task: Task) -> KernelPlan:
    """Multi-head latent attention: projections as matmul stages, flash attention between."""
    return KernelPlan(
        "MLA (projections + RoPE + flash attention)",
        partial(render_mla, recognise_mla(program, task), program),
        ("block_rows", "block_cols", "block_depth"),
        default_tunables(narrow_dtype=True),
    )


def _stage_kernel_plan(plan: Plan, precision: PrecisionChoice | None, split: Plan) -> KernelPlan:
    """`split`: the plan the tunable `fuse_epilogue` switches to when off (the same plan when
    nothing is fused)."""
    heads = mxu_heads(plan.stages)
    knobs: tuple[str, ...] = ("block_rows",)
    column_blocks = any(not s.full_cols or s in plan.running for s in plan.stages)
    knobs += ("block_cols",) if column_blocks else ()
    has_depth = any(isinstance(stage, MatmulStage) for stage in plan.stages)  # a conv has none
    knobs += ("block_depth",) if has_depth else ()
    wide = [np.dtype(head.lhs.dtype).itemsize >= 4 for head in heads]
    # f32 blocks cast to bf16 in the kernel: still f32 in HBM and VMEM, so no larger blocks
    chosen = precision.per_matmul if precision else ()
    narrowed = any(w and p == OperandPrecision.BF16 for w, p in zip(wide, chosen, strict=False))
    return KernelPlan(
        plan.family,
        partial(_render_stages, plan, split, precision),
        knobs,
        replace(default_tunables(not all(wide)), fuse_epilogue=plan is not split),
        precision,
        partial(_render_stages, plan, split, None) if narrowed else None,
    )


def _render_stages(
    fused: Plan, split: Plan, precision: PrecisionChoice | None, tunables: Tunables
) -> str:
    """The kernel file of `fused`, or of `split` when the tunables turn fusion off."""
    return render_kernel(fused if tunables.fuse_epilogue else split, tunables, precision)
