"""The one process that imports a candidate kernel: it traces the candidate's programs and
writes them as bytes (evaluation/tracer/transport.py), nothing more. Imports jax.

Whatever runs here is the candidate's: its module can replace any function of this process,
this one included. So nothing here is believed except what cannot help the candidate: a trace
that fails rejects it, and the bytes it writes are only ever the program that is judged, by a
judge process (evaluation/judge/worker.py) that never imports the kernel and checks every
program against the task before it runs it.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import jax

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation import gradients
from maxkernel_tui.kernels.evaluation.failure_text import first_lines
from maxkernel_tui.kernels.evaluation.protocol import (
    CandidateEvent,
    Traced,
    TraceRequest,
    WorkerProblem,
)
from maxkernel_tui.kernels.evaluation.tracer.transport import NotTransportable, dump_program
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import FAIL, Check
from maxkernel_tui.kernels.report.reasons import Reason, Said
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.task import Task, TaskError, TaskFormat

TRACE = CheckName.TRACE


def trace_candidate(request: TraceRequest) -> list[CandidateEvent]:
    """The candidate's program at each of `request.configs` as a `Traced` file; where it cannot
    be traced, a `Traced` error, or at the production shapes the failed trace check."""
    start = time.perf_counter()
    task = load_task(request.task).with_gradients(tuple(request.gradients))
    reference = runtime.load_reference(task)
    task = runtime.with_extra_configs(task, reference, request.extra_configs)
    try:
        candidate = runtime.load_candidate(task, reference, Path(request.kernel))
    except Exception as error:
        return [_failed(Reason.IMPORT_FAILED, first_lines(error), start)]
    events: list[CandidateEvent] = []
    for number, config in enumerate(request.configs):
        try:
            data = _traced(task, reference, candidate, config)
            backward = _traced_backward(task, reference, candidate, config)
        except TaskError as error:  # gradients the task cannot give: the request's fault
            return [WorkerProblem(str(error), usage=True)]
        except _Untraceable as problem:
            if config == task.configs[0]:  # the production shapes: the trace check's
                return [_failed(problem.reason, str(problem), start)]
            events.append(Traced(config, error=str(problem)))  # that configuration's runs'
            continue
        path = Path(request.out_dir) / f"program-{number}.bin"
        backward_path = Path(request.out_dir) / f"program-{number}-backward.bin"
        try:
            path.write_bytes(data)
            if backward is not None:
                backward_path.write_bytes(backward)
        except OSError as error:  # the kernel planted something in its own directory
            return [_failed(Reason.PROGRAM_UNWRITABLE, str(error), start)]
        seconds = round(time.perf_counter() - start, 3)
        written = str(backward_path) if backward is not None else None
        events.append(Traced(config, str(path), seconds, backward_file=written))
    return events


class _Untraceable(Exception):
    """Why the kernel has no program at a configuration."""

    reason = Reason.UNTRACEABLE


class _NoBackward(_Untraceable):
    """Why the kernel has no backward program at a configuration."""

    reason = Reason.BACKWARD_UNTRACEABLE


def _traced_backward(
    task: Task, reference: ModuleType, candidate: ModuleType, config: str
) -> bytes | None:
    """The candidate's backward program (evaluation/gradients.py) at `config`, where the task
    asks for gradients; None where it does not."""
    if not task.gradients:
        return None
    specs, static, outputs = runtime.io_specs(task, reference, config)
    where = "production shapes" if config == task.configs[0] else f"{config!r} shapes"
    at = gradients.positions(task, len(specs))
    gradients.check_differentiable(task, specs, at, outputs)
    try:
        traced = gradients.trace_backward(candidate.computation, specs, static, at, outputs)
    except Exception as error:
        raise _NoBackward(
            f"its backward (jax.vjp of computation for the gradients of "
            f"{', '.join(task.gradients)}) fails to trace at {where}: {first_lines(error)}; a "
            "pallas_call is not differentiable by itself: wrap it in a jax.custom_vjp whose "
            "backward is Pallas too"
        ) from None
    try:
        return dump_program(traced)
    except NotTransportable as error:
        raise _NoBackward(
            f"its backward program at {where} cannot be carried to the judge: {error}"
        ) from None


def _traced(task: Task, reference: ModuleType, candidate: ModuleType, config: str) -> bytes:
    specs, static = runtime.input_specs(task, reference, config)
    where = "production shapes" if config == task.configs[0] else f"{config!r} shapes"
    try:
        runtime.check_signature(task, candidate.computation, len(specs), static)
        traced = jax.make_jaxpr(lambda *d: candidate.computation(*d, *static))(*specs)
    except TaskError as error:
        raise _Untraceable(_signature_problem(task, candidate, error.problem)) from None
    except Exception as error:
        raise _Untraceable(f"fails to trace at {where}: {first_lines(error)}") from None
    try:
        return dump_program(traced)
    except NotTransportable as error:
        raise _Untraceable(
            f"its program at {where} cannot be carried to the judge: {error}"
        ) from None


def _signature_problem(task: Task, candidate: ModuleType, problem: str) -> str:
    """The reference runtime's sentence about the kernel; on a JAXBench-native task in its
    names, with what JAXBench's own harness does with such a kernel (it calls
    `optimized.workload(*baseline.create_inputs())`, so it fails there the same way)."""
    if task.source_format != TaskFormat.JAXBENCH or not problem.startswith("signature mismatch"):
        return problem.replace("computation", "the kernel's computation", 1)
    entry = "workload" if callable(getattr(candidate, "workload", None)) else "computation"
    return (
        problem.replace("computation", f"the kernel's {entry}", 1).replace(
            "from get_inputs", "from baseline.create_inputs()"
        )
        + f"; JAXBench's own harness calls {entry}(*baseline.create_inputs()) and fails it the "
        "same way"
    )


def _failed(reason: Reason, said: str, start: float) -> Check:
    return Check(TRACE, FAIL, reason, Said(said), round(time.perf_counter() - start, 3))
