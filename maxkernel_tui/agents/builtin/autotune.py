"""Choosing the tunables with the performance model: no TPU needed.

Each candidate is rendered, traced at bench shapes, analysed (perf/pallas_analysis.py) and
estimated for a TPU generation (perf/model.py); the fastest estimate whose VMEM footprint fits
wins. The search is coordinate-wise: one knob at a time over its choices, the others held at
the best so far.

With a `Timer` (a TPU under the tool), the model's order is only the first cut: its best few
settings are timed on the device (measured_tune.py) and the measured best is proposed. Without
one, the estimate decides. `TuneResult.basis` says which, and every figure carries its kind.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.tunables import CHOICES, Tunables
from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.catalog import described_reference_cost
from maxkernel_tui.kernels.evaluation.matmul_rounding import task_written_precision
from maxkernel_tui.kernels.evaluation.timing.measured_choice import (
    Measurement,
    Timer,
    measure_best,
)
from maxkernel_tui.kernels.perf.analysis import KernelAnalysis, ReferenceCost
from maxkernel_tui.kernels.perf.model import Estimate, estimate, minimal_io_bytes
from maxkernel_tui.kernels.perf.outside import OutsideTraffic, outside_traffic
from maxkernel_tui.kernels.perf.pallas_analysis import (
    analyze,
    matmul_traffic,
    transcendental_elements,
)
from maxkernel_tui.kernels.perf.xla_model import XlaPrecision
from maxkernel_tui.kernels.prefetch_values import kernel_scalars
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.kernels.task import Task

DEFAULT_TARGET = "v5e"


@dataclass(frozen=True)
class Trial:
    tunables: Tunables
    estimate: Estimate | None
    error: str | None = None


@dataclass(frozen=True)
class TuneResult:
    best: Tunables
    estimate: Estimate  # the model's, of `best`
    trials: list[Trial]
    measurement: Measurement | None = None  # the device timings, when a timer chose `best`

    @property
    def basis(self) -> Basis:
        measured = self.measurement is not None and self.measurement.best is not None
        return Basis.MEASURED if measured else Basis.ESTIMATED

    @property
    def chosen_by(self) -> str:
        if self.measurement is None or self.measurement.best is None:
            return f"the {self.estimate.target} performance model (estimated)"
        return f"timings on the device ({self.measurement.clock}; measured)"

    def lines(self) -> list[str]:
        """The autotune's figures in words, each saying whether it is measured or estimated."""
        if self.measurement is not None:
            return self.measurement.lines()
        return [
            f"chosen by the {self.estimate.target} performance model: "
            f"{self.estimate.seconds * 1e3:.3f} ms ({self.estimate.kind}); not measured"
        ]


def analyse_source(source: str, task: Task) -> tuple[list[KernelAnalysis], int, OutsideTraffic]:
    """The static analysis of each `pallas_call` of a kernel file at the task's bench shapes, the
    least bytes any implementation moves, and the copies XLA makes around the kernels (the file
    is ours: it runs in this process, traced only, never executed)."""
    module = types.ModuleType("builtin_kernel_draft")
    exec(compile(source, "<builtin kernel draft>", "exec"), module.__dict__)
    reference = runtime.load_reference(task)
    specs, static, outputs = runtime.io_specs(task, reference, task.configs[0])
    traced = jax.make_jaxpr(lambda *dynamic: module.computation(*dynamic, *static))(*specs)
    scalars = kernel_scalars(traced, task, reference, task.configs[0])
    return analyze(traced, scalars), minimal_io_bytes(specs, outputs), outside_traffic(traced)


def estimate_source(
    source: str,
    task: Task,
    target: str = DEFAULT_TARGET,
    reference_cost: ReferenceCost | None = None,
    tolerance_precision: XlaPrecision | None = None,
) -> Estimate:
    """The model's estimate for a kernel file at the task's bench shapes, against XLA as the
    reference is written and at `tolerance_precision` (the MXU passes the task's tolerance
    needs; None: not known)."""
    kernels, io_bytes, outside = analyse_source(source, task)
    return estimate(
        kernels,
        TARGETS[target],
        reference_cost,
        io_bytes=io_bytes,
        reference_precision=task_written_precision(task),
        tolerance_precision=tolerance_precision,
        outside=outside,
    )


def reference_cost(task: Task, target: str = DEFAULT_TARGET) -> ReferenceCost | None:
    """XLA's cost analysis of the reference compiled ahead of time for the TPU (for the
    roofline), from the task's cached description when there is one; None when it does not
    compile there."""
    if (described := described_reference_cost(task, target)) is not None:
        return described
    reference = runtime.load_reference(task)
    specs, static = runtime.input_specs(task, reference, task.configs[0])

    def function(*dynamic: Any) -> Any:
        return reference.computation(*dynamic, *static)

    try:
        compiled = aot.compile_for_tpu(function, specs, aot.target_for(target))
        program = jax.make_jaxpr(function)(*specs)
        exponentials = transcendental_elements(program)
        matmuls = matmul_traffic(program)
    except Exception:  # the roofline is optional; a reference too big for the target has none
        return None
    return ReferenceCost.from_xla(
        aot.cost_of(compiled), exponentials, matmuls, aot.relayouts_of(compiled)
    )


def autotune(
    render: Callable[[Tunables], str],
    task: Task,
    start: Tunables,
    knobs: tuple[str, ...],
    target: str = DEFAULT_TARGET,
    timer: Timer | None = None,
) -> TuneResult:
    """The tunables with the best estimate, searched one knob at a time from `start`; with a
    `timer`, the best measured of the model's best few."""
    trials: dict[Tunables, Trial] = {}

    def score(tunables: Tunables) -> float:
        if tunables not in trials:
            trials[tunables] = _trial(render, task, tunables, target)
        found = trials[tunables].estimate
        return found.seconds if found is not None and found.fits_vmem else math.inf

    best = start
    for knob in knobs:
        best = min((best.with_knob(knob, choice) for choice in CHOICES[knob]), key=score)
    if math.isinf(score(best)):
        errors = "; ".join(sorted({t.error for t in trials.values() if t.error}))
        raise CannotPlan(
            "no block sizes give a kernel that fits VMEM at bench "
            f"shapes{': ' + errors if errors else ''}"
        )
    measurement = None
    if timer is not None:
        fitting = sorted((t for t in trials if not math.isinf(score(t))), key=score)
        ranked = [(t.setting(), f"estimated {score(t) * 1e3:.3f} ms") for t in fitting]
        measurement = measure_best(
            ranked, lambda setting: render(Tunables.from_setting(setting)), timer
        )
        best = Tunables.from_setting(measurement.best) if measurement.best is not None else best
    found = trials[best].estimate
    assert found is not None  # its score is finite
    return TuneResult(best, found, list(trials.values()), measurement)


def _trial(render: Callable[[Tunables], str], task: Task, tunables: Tunables, target: str) -> Trial:
    try:
        return Trial(tunables, estimate_source(render(tunables), task, target))
    except Exception as error:  # a candidate the tracer rejects is just a worse candidate
        return Trial(tunables, None, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
