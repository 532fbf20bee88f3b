"""The built-in agent's answer to one step, in the format its role's parser expects (the
sub-agent contract): a Markdown plan, a kernel file in one ```python block, or a short
explanation. Imports jax (through the drafting modules): it runs in the agent's worker process.

Drafts are the expensive part (tracing, autotuning with the performance model), so they are kept
per task content and target: a planner step and the implementer step after it draft once.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from maxkernel_tui.agents.builtin.autotune import analyse_source, reference_cost
from maxkernel_tui.agents.builtin.draft import KernelDraft, draft_candidates, plan_task
from maxkernel_tui.agents.builtin.errors import BuiltinAgentError
from maxkernel_tui.agents.builtin.operand_precision import operand_words
from maxkernel_tui.agents.builtin.steering import (
    Offer,
    Wish,
    choose,
    heard,
    normalised,
    steering_words,
    wishes,
)
from maxkernel_tui.agents.builtin.strategy_moves import MOVES, NOT_A_CHANGE, NoMove, apply_strategy
from maxkernel_tui.agents.roles.context import NOTHING_ELSE, StepContext
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.agents.roles.tunables import find_tunables
from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.evaluation.matmul_rounding import (
    task_tolerance_precision,
    task_written_precision,
)
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.perf.analysis import KernelAnalysis, ReferenceCost
from maxkernel_tui.kernels.perf.model import Estimate, estimate
from maxkernel_tui.kernels.report.reasons import Reason
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.kernels.task import Task


@dataclass
class TaskDrafts:
    task: Task
    target: str
    drafts: list[KernelDraft]  # autotuned, best estimate first
    # every distinct kernel on offer, in the order a debugger tries them: autotuned drafts
    # first, then fallbacks, then the search strategies' changes of the best draft's blocks
    candidates: list[Offer]

    @cached_property
    def reference_cost(self) -> ReferenceCost | None:
        """Read when a plan is written, not when drafting: drafts made ahead (while the
        session describes the task) find it in the task's description by then, instead of
        compiling the reference for the TPU a second time."""
        return reference_cost(self.task, self.target)


class DraftCache:
    """Drafts per (task content, target), for the life of the worker."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, tuple[str, ...]], TaskDrafts] = {}

    def get(self, task_dir: str, target: str, gradients: tuple[str, ...] = ()) -> TaskDrafts:
        """`gradients`: the session's (a folder judged on gradients by an option, not its yaml)."""
        task = load_task(Path(task_dir), cache=cache_dir())
        if gradients and gradients != task.gradients:
            task = task.with_gradients(gradients)
        key = (_content_digest(task), target, task.gradients)
        if key not in self._entries:
            self._entries[key] = _draft(task, target)
        return self._entries[key]


def answer(step: StepContext, cache: DraftCache) -> str:
    """The text of the answer for a planner, implementer, debugger or explainer step."""
    drafts = cache.get(step.task_dir, step.target, step.gradients)
    if step.role == Role.PLANNER:
        return plan_markdown(drafts, step)
    if step.role == Role.IMPLEMENTER and (step.strategy or "") not in NOT_A_CHANGE:
        return _strategy_answer(drafts, step)
    if step.role == Role.IMPLEMENTER and (step.turned_down or steering_words(step)):
        return _steered_answer(drafts, step)
    if step.role == Role.IMPLEMENTER:
        best = drafts.drafts[0]
        return _kernel_answer(
            f"Kernel for **{best.family}**, tunables chosen with the {step.target} performance "
            f"model ({_estimate_words(best.estimate)}). {_precision_words(best)}",
            best.source,
        )
    if step.role == Role.DEBUGGER:
        return _debugger_answer(drafts, step)
    if step.role == Role.EXPLAINER:
        return _explanation(drafts, step)
    raise BuiltinAgentError(f"the built-in agent's worker does not answer role {step.role!r}")


def _strategy_answer(drafts: TaskDrafts, step: StepContext) -> str:
    """The parent kernel with the search strategy's change of block sizes (BuiltinAgentError
    when the strategy has none for it: an answer that changes nothing would cost an evaluation
    and teach the search nothing)."""
    strategy = step.strategy or ""
    chosen = drafts.drafts[0].precision  # what the task's tolerance check allows, per matmul
    allowed = chosen.per_matmul if chosen is not None else None
    try:
        source, words = apply_strategy(step.kernel or drafts.drafts[0].source, strategy, allowed)
    except NoMove as reason:
        raise BuiltinAgentError(str(reason)) from None
    return _kernel_answer(f"Strategy **{strategy}**: {words}.", source)


def _steered_answer(drafts: TaskDrafts, step: StepContext) -> str:
    """The implementer's answer to the engineer's words and the kernels turned down at this
    step: the kernel on offer that does most of what they ask, or plainly nothing else."""
    best = drafts.drafts[0]
    words = steering_words(step)
    wished = wishes(words)
    turned = [t.content for t in step.turned_down]
    last = _offer_of(drafts, turned[-1]) if turned else _offer_of(drafts, best.source)
    choice = choose(drafts.candidates, turned, wished, last)
    if choice.offer is None:
        return _nothing_else(drafts, step, words, wished, last)
    offer = choice.offer
    return _kernel_answer(
        f"{heard(words, wished, choice.notes)} It offers **{offer.family}**, {offer.how} "
        f"({_tunable_words(offer.source)}).".strip(),
        offer.source,
    )


def _nothing_else(
    drafts: TaskDrafts, step: StepContext, words: list[str], wished: list[Wish], last: Offer
) -> str:
    """Every kernel on offer was turned down: said so first (the engine then asks the engineer),
    with the kernel turned down last (the answer's format wants one)."""
    notes = tuple(f"{wish}: not possible here" for wish in wished)
    return _kernel_answer(
        f"{NOTHING_ELSE} all {len(drafts.candidates)} kernels the built-in agent can write for "
        f"this task were turned down ({len(step.turned_down)} at this step). "
        f"{heard(words, wished, notes)} Edit the kernel yourself, or say what to change.",
        last.source,
    )


def _offer_of(drafts: TaskDrafts, source: str) -> Offer:
    """The offer `source` is, or the source as an offer of an unknown family."""
    same = normalised(source)
    found = (o for o in drafts.candidates if normalised(o.source) == same)
    return next(found, Offer(source, "a kernel of its own", "not written by this agent"))


def plan_markdown(drafts: TaskDrafts, step: StepContext) -> str:
    best = drafts.drafts[0]
    kernels, io_bytes, outside = analyse_source(best.source, drafts.task)
    found = estimate(
        kernels,
        TARGETS[drafts.target],
        drafts.reference_cost,
        io_bytes=io_bytes,
        reference_precision=task_written_precision(drafts.task),
        tolerance_precision=(
            best.precision.xla if best.precision else task_tolerance_precision(drafts.task)
        ),
        outside=outside,
    )
    lines = [
        f"# Plan: {best.family}",
        "",
        (
            f"Recognised from the reference's jaxpr (not its name): **{best.family}**, "
            f"{len(kernels)} `pallas_call`(s)."
        ),
        "",
        *_kernel_plan_lines(best.source),
        "",
        *_kernel_sections(drafts, kernels, found),
        "",
        "## Precision",
        "",
        _precision_words(best),
        "",
        "## Expected bound",
        "",
        _bound_words(drafts.target, found),
    ]
    if len(drafts.drafts) > 1:
        lines += ["", "## Alternatives", ""]
        lines += [
            f"- {d.family}: {_estimate_words(d.estimate)} ({_tunable_words(d.source)})"
            for d in drafts.drafts[1:]
        ]
    if words := steering_words(step):
        wished = wishes(words)
        notes = tuple(f"{wish}: the implementer's next kernel looks for it" for wish in wished)
        lines += [
            "",
            "## Your words",
            "",
            (
                f"{heard(words, wished, notes)} The built-in agent plans from the reference's "
                "structure: this plan is the same as before"
                + (" unless a kernel it can write grants what you ask." if wished else ".")
            ),
        ]
    return "\n".join(lines) + "\n"


def _kernel_sections(
    drafts: TaskDrafts, kernels: list[KernelAnalysis], found: Estimate
) -> list[str]:
    """The plan's Tiling, Grid and Memory sections, one line per kernel in each."""
    lines = [
        "## Tiling",
        "",
        (
            f"Tunables (autotuned for {drafts.target}, chosen by {drafts.drafts[0].chosen_by}): "
            f"{_tunable_words(drafts.drafts[0].source)}. Each "
            "shrinks at call time to a divisor of the actual size that keeps the (8, 128) tiling."
        ),
        "",
    ]
    lines += [
        f"- kernel {i} `{k.name}`: "
        + "; ".join(f"{b.role} {tuple(b.shape)} {b.dtype}" for b in k.blocks)
        for i, k in enumerate(kernels)
    ]
    lines += ["", "## Grid", ""]
    lines += [
        f"- kernel {i}: grid {tuple(k.grid)}, dimension semantics "
        f"{tuple(k.dimension_semantics) if k.dimension_semantics else 'unstated'}, "
        f"{k.steps} steps"
        for i, k in enumerate(kernels)
    ]
    lines += ["", "## Memory", ""]
    lines += [
        f"- kernel {i}: VMEM footprint {k.vmem_bytes / 2**20:.1f} MiB (double-buffered blocks "
        f"and scratch) of the {found.vmem_capacity / 2**20:.0f} MiB on {drafts.target}; "
        f"{k.hbm_bytes / 1e9:.3g} GB moved from and to HBM"
        for i, k in enumerate(kernels)
    ]
    return lines


def _bound_words(target: str, found: Estimate) -> str:
    share = (
        f", {found.roofline_share:.0%} of the roofline" if found.roofline_share is not None else ""
    )
    speedup = (
        f", est. speedup over the model's time for the reference: {found.speedups.label()}"
        if found.speedup is not None
        else ""
    )
    return (
        f"An estimate of the performance model for TPU {target} at bench shapes, not a "
        f"measurement: {_estimate_words(found)}{share}{speedup}."
    )


def _debugger_answer(drafts: TaskDrafts, step: StepContext) -> str:
    """The next kernel on offer after the one that failed (the first one when the failing text
    is not the agent's own), never the failing text itself nor one turned down at this step;
    among those, the one that does most of what the engineer asked."""
    failing = normalised(step.kernel or "")
    sources = [normalised(c.source) for c in drafts.candidates]
    start = sources.index(failing) + 1 if failing in sources else 0
    order = drafts.candidates[start:] + drafts.candidates[:start]
    detail = step.failure.detail if step.failure else ""
    if _over_vmem(step):  # smaller blocks are the remedy for VMEM over-use
        order.sort(key=lambda c: c.how != _HALVED)
    words = steering_words(step)
    wished = wishes(words)
    turned = [step.kernel or "", *(t.content for t in step.turned_down)]
    last = _offer_of(drafts, step.kernel or "")
    choice = choose(order, turned, wished, last)
    if choice.offer is None:
        return _nothing_else(drafts, step, words, wished, last)
    chosen = choice.offer
    check = step.failure.check if step.failure else None
    first_line = detail.strip().splitlines()[0][:300] if detail.strip() else "no detail given"
    failed = f"The {check} check failed" if check else "The kernel failed"
    return _kernel_answer(
        f"{failed} ({first_line}). The built-in agent cannot reason about the "
        f"error; it offers its next kernel: **{chosen.family}**, {chosen.how} "
        f"({_tunable_words(chosen.source)}). {heard(words, wished, choice.notes)}".strip(),
        chosen.source,
    )


def _over_vmem(step: StepContext) -> bool:
    """The compiler said the kernel uses more VMEM than there is (Mosaic's words, which the
    lowering and compile checks carry)."""
    failure = step.failure
    return (
        failure is not None
        and failure.reason in _COMPILER_SAID
        and "vmem" in failure.detail.lower()
    )


def _explanation(drafts: TaskDrafts, step: StepContext) -> str:
    best = drafts.drafts[0]
    lines = []
    if step.question:
        lines += [
            (
                "The built-in agent does not interpret free-form questions; this is what it knows "
                "about "
                "its plan."
            ),
            "",
        ]
    lines += [
        (
            f"It recognised **{best.family}** in the reference's jaxpr (it reads the program's "
            "structure, "
            "never the task's name)."
        ),
        "",
        *_kernel_plan_lines(best.source),
        "",
        (
            f"Tunables: {_tunable_words(best.source)}, chosen with the {drafts.target} "
            f"performance model; {_estimate_words(best.estimate)} (an estimate, not a "
            "measurement)."
        ),
        "",
        _precision_words(best),
    ]
    return "\n".join(lines) + "\n"


_HALVED = "with halved block sizes"
# The checks whose failure carries the compiler's own words.
_COMPILER_SAID = frozenset({Reason.LOWERING_FAILED, Reason.COMPILE_FAILED})
_OWN_PRECISION = "with the operands' own dtype on the MXU (no bf16 rounding)"


def _draft(task: Task, target: str) -> TaskDrafts:
    drafts = draft_candidates(task, target=target)
    candidates = [Offer(d.source, d.family, f"autotuned for {target}") for d in drafts]
    for plan in plan_task(task, choose_precision=True):
        if plan.as_reference is not None:  # the chosen precision may fail the harness's check
            candidates.append(Offer(plan.as_reference(plan.start), plan.family, _OWN_PRECISION))
        halved = replace(
            plan.start,
            block_rows=max(128, plan.start.block_rows // 2),
            block_cols=max(128, plan.start.block_cols // 2),
            block_depth=max(128, plan.start.block_depth // 2),
        )
        candidates.append(Offer(plan.render(plan.start), plan.family, "at its untuned defaults"))
        candidates.append(Offer(plan.render(halved), plan.family, _HALVED))
    best = drafts[0]
    for strategy in MOVES:  # other tilings of the best draft, as a search would try them
        with contextlib.suppress(NoMove):
            source, words = apply_strategy(best.source, strategy)
            candidates.append(Offer(source, best.family, f"strategy {strategy} ({words})"))
    distinct: dict[str, Offer] = {}
    for candidate in candidates:
        distinct.setdefault(normalised(candidate.source), candidate)
    return TaskDrafts(task, target, drafts, list(distinct.values()))


def _kernel_answer(preface: str, source: str) -> str:
    return f"{preface}\n\n```python\n{source.rstrip()}\n```\n"


def _kernel_plan_lines(source: str) -> list[str]:
    """The plan the kernel file states in its docstring, after the first paragraph."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    paragraphs = docstring.split("\n\n")
    return "\n\n".join(paragraphs[1:]).splitlines() if len(paragraphs) > 1 else []


def _tunable_words(source: str) -> str:
    return ", ".join(f"{name} = {value}" for name, value in find_tunables(source).items())


def _precision_words(draft: KernelDraft) -> str:
    if draft.precision is None or not draft.precision.per_matmul:
        return (
            "Matmul operands: their own dtypes, at the reference's precision; the estimated "
            "speedup compares with XLA at its default precision."
        )
    choice = draft.precision
    return (
        f"Matmul operands: {operand_words(choice.per_matmul)}. Why: {choice.why}. "
        f"The estimated speedup compares with {choice.xla.words}."
    )


def _estimate_words(found: Estimate) -> str:
    return f"estimated {found.seconds * 1e3:.3f} ms on {found.target}, {found.bound}-bound"


def _content_digest(task: Task) -> str:
    digest = hashlib.sha256()
    for path in task.defining_files:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
