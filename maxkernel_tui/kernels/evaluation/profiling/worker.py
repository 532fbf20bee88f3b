"""The process that profiles a candidate: static analysis of its Pallas kernels at production
shapes, the reference's XLA cost on each TPU generation, and a trace. Imports jax, never the
candidate: it analyses and runs the programs the tracer carried (evaluation/tracer/carried.py),
so a kernel cannot write its own figures.

    python -m maxkernel_tui.kernels.evaluation.profiling.worker

One request (a `ProfileRequest`), one JSON answer (a `ProfileAnswer`, or {"error"}). On a TPU
the trace is the device's (measured, with the DMA-wait and compute shares of its device time);
elsewhere it is the host side of a CPU interpret-mode run, labelled so.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import jax
from jax.experimental.pallas import tpu as pltpu
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation import gradients
from maxkernel_tui.kernels.evaluation.matmul_rounding import tolerance_precision, written_precision
from maxkernel_tui.kernels.evaluation.tracer.carried import (
    ProgramRefused,
    checked_backward,
    checked_program,
)
from maxkernel_tui.kernels.evaluation.tracer.transport import interpreted
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.perf.analysis import (
    ProfileAnswer,
    ProfileRequest,
    ReferenceCost,
    Trace,
    TraceEvent,
    trace_config,
)
from maxkernel_tui.kernels.perf.device_trace import dma_share, load_events
from maxkernel_tui.kernels.perf.model import minimal_io_bytes
from maxkernel_tui.kernels.perf.outside import outside_traffic
from maxkernel_tui.kernels.perf.pallas_analysis import (
    analyze,
    matmul_traffic,
    transcendental_elements,
)
from maxkernel_tui.kernels.prefetch_values import kernel_scalars
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY

TOP_EVENTS = 8
NO_CPU_TRACE = (
    "skipped: the task has no check configuration, and interpret mode at production shapes "
    "would take minutes on a CPU"
)
# Python frames of the profiler itself, not of the program.
_PROFILER_FRAMES = ("$profiler.py", "$contextlib.py", "$threading.py")


def profile(request: ProfileRequest) -> ProfileAnswer:
    task = load_task(request.task).with_gradients(tuple(request.gradients))
    reference = runtime.load_reference(task)
    bench = task.configs[0]
    specs, static, outputs = runtime.io_specs(task, reference, bench)
    at = gradients.positions(task, len(specs)) if task.gradients else ()

    def program(config: str) -> ClosedJaxpr:
        if config not in request.programs:
            raise ProgramRefused(f"no program was traced at {config!r} shapes")
        file, where = Path(request.programs[config]), f"{config!r} shapes"
        if task.gradients:  # the backward program: forward and backward kernels together
            return checked_backward(file, task, reference, config, where, at)
        return checked_program(file, task, reference, config, where)

    function: Any = functools.partial(_reference_function, reference, static)
    inputs, results = list(specs), list(outputs)
    if task.gradients:  # XLA's jax.vjp of the reference, fused as XLA fuses it
        function, inputs = gradients.flat_backward(
            reference.computation, specs, static, at, outputs
        )
        results = [specs[p] for p in at]
    traced = program(bench)
    # a backward program takes cotangents too: its scalar operands are not computed here
    scalars = None if task.gradients else kernel_scalars(traced, task, reference, bench)
    kernels, outside = analyze(traced, scalars), outside_traffic(traced)
    known = request.reference_costs  # the reference does not change between candidates
    costs = {
        name: known.get(name) or _reference_cost(function, inputs, name) for name in request.targets
    }
    trace = None
    if request.trace:  # without it, an estimate only (the autotuner's candidates)
        on_tpu = jax.devices()[0].platform == "tpu"
        config = trace_config(task, on_tpu)
        if config is not None:
            traced = program(config)
            trace = _trace(task, reference, traced, config, Path(request.trace_dir), on_tpu)
        else:  # interpret mode at production shapes takes minutes on a CPU: never run it
            trace = Trace("", bench, NO_CPU_TRACE, 0.0, [])
    written, tolerance = _precisions(task, reference, specs, static, request.tolerance_passes)
    io_bytes = minimal_io_bytes(jax.tree.leaves(inputs), jax.tree.leaves(results))
    return ProfileAnswer(
        bench,
        kernels,
        costs,
        io_bytes,
        trace,
        written_passes=written,
        tolerance_passes=tolerance,
        gradients=list(task.gradients),
        outside=outside if outside.copies else None,
    )


def _precisions(
    task: Any, reference: Any, specs: Any, static: Any, known: int | None
) -> tuple[int, int | None]:
    """The MXU passes of XLA running the reference as written and at the precision the task's
    tolerance needs (`known` from an earlier profile, else found here: None where it cannot)."""
    jaxpr = jax.make_jaxpr(lambda *d: reference.computation(*d, *static))(*specs).jaxpr
    if known is None:
        try:
            found = tolerance_precision(task, reference, jaxpr)
        except Exception:  # the reference's numerics at other shapes: the figure stays unknown
            found = None
        known = None if found is None else found.passes
    return written_precision(jaxpr).passes, known


def _reference_function(reference: Any, static: Any, *dynamic: Any) -> Any:
    return reference.computation(*dynamic, *static)


def _reference_cost(function: Any, specs: Any, target_name: str) -> ReferenceCost:
    try:
        compiled = aot.compile_for_tpu(function, specs, aot.target_for(target_name))
        program = jax.make_jaxpr(function)(*specs)
        exponentials = transcendental_elements(program)
        matmuls = matmul_traffic(program)
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return ReferenceCost(error=first[:300])
    return ReferenceCost.from_xla(
        aot.cost_of(compiled), exponentials, matmuls, aot.relayouts_of(compiled)
    )


def _trace(
    task: Any, reference: Any, program: ClosedJaxpr, config: str, trace_dir: Path, on_tpu: bool
) -> Trace:
    """Run the kernel under jax.profiler and summarize. On a TPU it runs twice (compile, then
    the traced run); on a CPU once, compile included: that trace is the host side of the
    interpreter anyway, and a second interpret-mode run would double the profile's time."""
    dynamic, _ = runtime.make_inputs(task, reference, config, seed=0)
    if task.gradients:  # the backward program takes the outputs' cotangents too
        _, _, outputs = runtime.io_specs(task, reference, config)
        dynamic = (*dynamic, *gradients.cotangents(outputs, 0))
    # a carried pallas_call keeps the interpret flag it was traced with: rewritten, not forced
    run = jaxpr_as_fun(program if on_tpu else interpreted(program, pltpu.InterpretParams()))
    call = jax.jit(lambda *d: run(*jax.tree.leaves(d)))
    if on_tpu:
        jax.block_until_ready(call(*dynamic))
    trace_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with jax.profiler.trace(str(trace_dir)):
        jax.block_until_ready(call(*dynamic))
    wall = time.perf_counter() - start
    files = sorted(trace_dir.rglob("*.xplane.pb"))
    events = _top_events(files[-1], on_tpu) if files else []
    dma = dma_share(load_events(files[-1])) if files and on_tpu else None
    kind = (
        f"{Basis.MEASURED} on TPU (device trace)"
        if on_tpu
        else "host-side trace of a CPU interpret-mode run, not device time"
    )
    return Trace(str(trace_dir), config, kind, wall, events, dma)


def _top_events(xplane: Path, on_tpu: bool) -> list[TraceEvent]:
    """Total time per event name on the device planes (TPU) or the host planes (CPU)."""
    data = jax.profiler.ProfileData.from_file(str(xplane))
    totals: dict[str, float] = defaultdict(float)
    for plane in data.planes:
        if on_tpu != ("TPU" in plane.name):
            continue
        for line in plane.lines:
            for event in line.events:
                if not event.name.startswith(_PROFILER_FRAMES):
                    totals[event.name] += event.duration_ns
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:TOP_EVENTS]
    return [TraceEvent(name[:80], round(ns / 1e6, 3)) for name, ns in ranked]


def main() -> None:
    reply(READY)
    line = sys.stdin.readline()
    if line.strip():
        try:
            answer = profile(ProfileRequest.from_json(json.loads(line)))
            reply(answer.to_json())
        except Exception as error:  # the caller reports it; the process ends either way
            reply({"error": f"{type(error).__name__}: {str(error)[:500]}"})


if __name__ == "__main__":
    main()
