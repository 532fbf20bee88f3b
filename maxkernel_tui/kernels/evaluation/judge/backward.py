"""The judge's checks of a candidate's backward program (tasks that ask for gradients): its heavy
work in Pallas, its programs for the TPU, its production defences and its gradients on a
numerics run. Imports jax; runs in the judge's process (judge/worker.py), never the candidate's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
from jax.extend.core import jaxpr_as_fun

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.evaluation import gradients
from maxkernel_tui.kernels.evaluation.failure_text import first_lines
from maxkernel_tui.kernels.evaluation.judge.outside import outside_pallas
from maxkernel_tui.kernels.evaluation.judge.subject import Refused, Subject
from maxkernel_tui.kernels.evaluation.tracer.transport import interpreted
from maxkernel_tui.kernels.evaluation.work import kernel_work, production_checks
from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure
from maxkernel_tui.kernels.report.checks import FAIL, PASS, SKIP, Check
from maxkernel_tui.kernels.report.reasons import NoFigures, Reason, Said, WorkShare
from maxkernel_tui.kernels.report.status import CheckName

# The production defences' reasons, as the backward's.
_BACKWARD_DEFENCES = {
    Reason.DEFENCES_HELD: Reason.BACKWARD_DEFENCES_HELD,
    Reason.DEFENCES_BROKEN: Reason.BACKWARD_DEFENCES_BROKEN,
}


def trace_check(subject: Subject) -> Check:
    """The backward's heavy work runs inside Pallas kernels too: the candidate's backward
    program against jax.vjp of the reference at production shapes."""
    start = time.perf_counter()

    def check(status: Any, reason: Reason, figures: Any) -> Check:
        seconds = round(time.perf_counter() - start, 3)
        return Check(CheckName.TRACE, status, reason, figures, seconds)

    try:
        traced = subject.backward(subject.bench)
    except Refused as refusal:
        return check(FAIL, Reason.TRACE_REFUSED, Said(str(refusal)))
    work = measure(traced)
    if not work.has_pallas:
        return check(FAIL, Reason.BACKWARD_NO_PALLAS_CALL, NoFigures())
    reference = gradients.trace_backward(
        subject.reference.computation, subject.specs, subject.static, subject.at, subject.expected
    )
    outside = outside_pallas(work, measure(reference))
    if outside:
        return check(FAIL, Reason.BACKWARD_WORK_OUTSIDE_PALLAS, outside)
    named = f"gradients of {', '.join(subject.task.gradients)}"
    share = WorkShare(len(work.pallas_calls), work.xla_flops, work.xla_reduced, named)
    return check(PASS, Reason.BACKWARD_IN_PALLAS, share)


def production_programs(subject: Subject) -> list[tuple[Callable[..., Any], Any]]:
    """The programs lowered and compiled for the TPU, with their inputs: the forward, and the
    backward where the task asks for gradients (its kernels run on the TPU in training)."""
    programs: list[tuple[Callable[..., Any], Any]] = [
        (subject.function(subject.bench), subject.specs)
    ]
    if subject.task.gradients:
        backward = jaxpr_as_fun(subject.backward(subject.bench))
        programs.append((backward, subject.backward_specs(subject.bench)))
    return programs


def defences(subject: Subject) -> Check:
    """The production defences of the backward (evaluation/work/production_checks.py: its
    kernels' matmul work against jax.vjp of the reference, their coverage of the gradients and
    their bodies, at production shapes against check shapes); how the backward is run at
    production is the forward's numerics defence's choice, not here."""
    start = time.perf_counter()

    def at(config: str) -> production_checks.Shapes:
        specs, static, outputs = runtime.io_specs(subject.task, subject.reference, config)
        reference, flat = gradients.flat_backward(
            subject.reference.computation, specs, static, subject.at, outputs
        )
        program = jaxpr_as_fun(subject.backward(config))
        return kernel_work.measure_shapes(config, program, reference, flat)

    try:
        production, checked = at(subject.bench), at(CHECK)
    except Exception as error:  # judged by the gradients' numerics alone
        why = Said(f"the backward: {first_lines(error)}")
        seconds = round(time.perf_counter() - start, 3)
        return Check(production_checks.CHECK_NAME, SKIP, Reason.DEFENCES_UNMEASURABLE, why, seconds)
    findings = production_checks.ProductionFindings(
        [
            production_checks.work_defence(production),
            production_checks.coverage_defence(production.candidate, checked.candidate),
            production_checks.bodies_defence(production.candidate, checked.candidate),
        ]
    )
    found = findings.to_check(time.perf_counter() - start)
    return dataclasses.replace(found, reason=_BACKWARD_DEFENCES[found.reason])


def gradients_run(
    subject: Subject,
    config: str,
    seed: int,
    dynamic: Any,
    params: Any,
    compiled: dict[str, Any],
) -> list[Any]:
    """The candidate's gradients at these inputs and the seed's cotangents (the ones the
    reference worker draws), its backward program run in interpret mode; a failure there says
    it was the backward's."""
    program = compiled.get(config)
    if program is None:
        program = compiled[config] = jax.jit(
            jaxpr_as_fun(interpreted(subject.backward(config), params))
        )
    _, _, expected = runtime.io_specs(subject.task, subject.reference, config)
    try:
        return list(
            jax.block_until_ready(
                program(*jax.tree.leaves(dynamic), *gradients.cotangents(expected, seed))
            )
        )
    except Exception as failure:
        raise RuntimeError(f"the backward: {first_lines(failure)}") from None
