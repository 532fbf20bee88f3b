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
from maxkernel_tui.kernels.evaluation.failure_text import first_lines
from maxkernel_tui.kernels.evaluation.protocol import CandidateEvent, Traced, TraceRequest
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
    task = load_task(request.task)
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
        except _Untraceable as problem:
            if config == task.configs[0]:  # the production shapes: the trace check's
                return [_failed(Reason.UNTRACEABLE, str(problem), start)]
            events.append(Traced(config, error=str(problem)))  # that configuration's runs'
            continue
        path = Path(request.out_dir) / f"program-{number}.bin"
        try:
            path.write_bytes(data)
        except OSError as error:  # the kernel planted something in its own directory
            return [_failed(Reason.PROGRAM_UNWRITABLE, str(error), start)]
        events.append(Traced(config, str(path), round(time.perf_counter() - start, 3)))
    return events


class _Untraceable(Exception):
    """Why the kernel has no program at a configuration."""


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
