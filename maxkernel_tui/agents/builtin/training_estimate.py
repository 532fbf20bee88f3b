"""The performance model's estimate of a training kernel: forward and backward together, at the
task's production shapes, against XLA's cost of the reference's forward and backward (its
`jax.vjp`, compiled ahead of time for the TPU). Every figure is the model's (estimated).
Imports jax; the kernel file is our own, traced here, never executed.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import jax

from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.tunables import CHOICES, Tunables
from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.model import Estimate, estimate, minimal_io_bytes
from maxkernel_tui.kernels.perf.outside import outside_traffic
from maxkernel_tui.kernels.perf.pallas_analysis import (
    analyze,
    matmul_traffic,
    transcendental_elements,
)
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.kernels.task import Task


def forward_and_backward(
    function: Callable[..., Any], static: Sequence[Any], wanted: Sequence[int]
) -> Callable[..., Any]:
    """(*dynamic, cotangent) -> (output, gradients of the `wanted` dynamic arguments)."""

    def run(*arguments: Any) -> Any:
        *dynamic, cotangent = arguments

        def of_wanted(*chosen: Any) -> Any:
            full = list(dynamic)
            for position, value in zip(wanted, chosen, strict=True):
                full[position] = value
            return function(*full, *static)

        out, pullback = jax.vjp(of_wanted, *(dynamic[i] for i in wanted))
        return out, pullback(cotangent)

    return run


def estimate_training(
    source: str, task: Task, target: str, reference_cost: ReferenceCost | None = None
) -> Estimate:
    """The model's time for the file's forward and backward kernels at bench shapes, against
    XLA's for the reference's forward and backward (`reference_cost`, from
    `gradient_reference_cost`)."""
    module = types.ModuleType("builtin_training_draft")
    exec(compile(source, "<builtin training draft>", "exec"), module.__dict__)
    reference = runtime.load_reference(task)
    specs, static, outputs = runtime.io_specs(task, reference, task.configs[0])
    (output,) = jax.tree.leaves(outputs)
    cotangent = jax.ShapeDtypeStruct(output.shape, output.dtype)
    names = reference.computation.__code__.co_varnames
    wanted = [names.index(name) for name in task.gradients]
    kernel = forward_and_backward(module.computation, static, wanted)
    traced = jax.make_jaxpr(kernel)(*specs, cotangent)
    gradients = [specs[i] for i in wanted]
    io_bytes = minimal_io_bytes([*specs, cotangent], [output, *gradients])
    return estimate(
        analyze(traced),
        TARGETS[target],
        reference_cost,
        io_bytes=io_bytes,
        outside=outside_traffic(traced),
    )


def gradient_reference_cost(task: Task, target: str) -> ReferenceCost | None:
    """XLA's cost analysis of the reference's forward and backward at bench shapes, compiled
    ahead of time for the TPU; None where it does not compile there (too big for its HBM)."""
    reference = runtime.load_reference(task)
    specs, static, outputs = runtime.io_specs(task, reference, task.configs[0])
    (output,) = jax.tree.leaves(outputs)
    cotangent = jax.ShapeDtypeStruct(output.shape, output.dtype)
    names = reference.computation.__code__.co_varnames
    wanted = [names.index(name) for name in task.gradients]
    return _gradient_cost(
        forward_and_backward(reference.computation, static, wanted), specs, cotangent, target
    )


def tune_training(
    render: Callable[[Tunables], str],
    task: Task,
    start: Tunables,
    knobs: tuple[str, ...],
    target: str,
) -> tuple[Tunables, Estimate]:
    """The tunables whose forward and backward the model finds fastest (and that fit VMEM),
    one knob at a time from `start`, with the estimate of the best."""
    cost = gradient_reference_cost(task, target)
    trials: dict[Tunables, Estimate | None] = {}

    def score(tunables: Tunables) -> float:
        if tunables not in trials:
            try:
                trials[tunables] = estimate_training(render(tunables), task, target, cost)
            except Exception:  # a setting the tracer rejects is only a worse setting
                trials[tunables] = None
        found = trials[tunables]
        return found.seconds if found is not None and found.fits_vmem else math.inf

    best = start
    for knob in knobs:
        settings: list[dict[str, Any]] = [{knob: choice} for choice in CHOICES[knob]]
        # the setting so far stays a candidate: a knob none of whose choices fits (4t's, at
        # production) must not trade a fitting kernel for one that does not
        best = min([best, *(replace(best, **setting) for setting in settings)], key=score)
    found = trials.get(best) if not math.isinf(score(best)) else None
    if found is None:
        raise CannotPlan("no block sizes give a training kernel that fits VMEM at bench shapes")
    return best, found


def _gradient_cost(
    function: Callable[..., Any], specs: Sequence[Any], cotangent: Any, target: str
) -> ReferenceCost | None:
    """XLA's cost analysis of the reference's forward and backward compiled for the TPU."""
    try:
        compiled = aot.compile_for_tpu(function, [*specs, cotangent], aot.target_for(target))
        program = jax.make_jaxpr(function)(*specs, cotangent)
    except Exception:  # the roofline is optional; a gradient too big for the target has none
        return None
    # each matmul at its own bound, as the profile's XLA cost takes them (perf/xla_model.py)
    return ReferenceCost.from_xla(
        aot.cost_of(compiled),
        transcendental_elements(program),
        matmul_traffic(program),
        aot.relayouts_of(compiled),
    )
