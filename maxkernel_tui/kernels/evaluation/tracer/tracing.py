"""The harness's side of the tracer (evaluation/tracer/candidate.py): it asks the one process
that imports a candidate for its programs and believes nothing else from it. No jax here.

The tracer runs the candidate's code, so each line it writes may be the candidate's. What it
can say that counts is limited to what cannot help a kernel: a failed trace (the kernel is
rejected) and the files of its programs (which are then simply what the judge checks and runs).
The sandbox's own check counts only as the first line, written before the kernel is imported.
A line that claims anything else, a file outside its directory, a link, or a file over the
transport's size limit rejects the kernel.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from maxkernel_tui.kernels.evaluation.failure_text import worker_failure
from maxkernel_tui.kernels.evaluation.protocol import (
    PROGRAM_MAX_BYTES,
    Done,
    Traced,
    TraceRequest,
    WorkerProblem,
    event_from_json,
    request_to_json,
)
from maxkernel_tui.kernels.report.checks import FAIL, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import (
    At,
    Configs,
    Reason,
    Said,
    TracerClaim,
    Unbelievable,
)
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.sandbox.report import SANDBOX
from maxkernel_tui.kernels.snapshot import TaskSnapshot
from maxkernel_tui.kernels.workers import (
    FailureKind,
    Limits,
    LineWorker,
    WorkerFailure,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

TRACE = CheckName.TRACE
CANDIDATE_WORKER = "maxkernel_tui.kernels.evaluation.judge.worker"
TRACER_MEMORY_BYTES = 8 * 2**30  # as an evaluation's candidate processes


class TracerUsageError(ValueError):
    """The trace request itself is wrong (the tracer said so before the kernel ran)."""


@dataclass(frozen=True)
class TracedPrograms:
    """The candidate's programs, one per configuration, as the bytes the tracer wrote; where it
    has none, why (`untraced`)."""

    programs: dict[str, bytes]
    untraced: dict[str, str]
    # the backward programs (evaluation/gradients.py), where the task asks for gradients
    backward: dict[str, bytes] = field(default_factory=dict)

    def write(self, directory: Path) -> dict[str, str]:
        """Each program as a file in `directory` (the judge's); configuration: path."""
        return write_programs(self.programs, directory)

    def write_backward(self, directory: Path) -> dict[str, str]:
        """Each backward program as a file in `directory`; configuration: path."""
        return write_programs(self.backward, directory, "backward")


def write_programs(
    programs: dict[str, bytes], directory: Path, kind: str = "program"
) -> dict[str, str]:
    """Each program as a file in `directory` (of the process that uses them); configuration:
    path."""
    files = {}
    for number, (config, data) in enumerate(programs.items()):
        path = directory / f"{kind}-{number}.bin"
        path.write_bytes(data)
        files[config] = str(path)
    return files


def trace_programs(
    worker: LineWorker,
    request: TraceRequest,
    timeout: float,
    report: EvalReport,
    memory_bytes: int | None = None,
) -> TracedPrograms | None:
    """The programs the tracer `worker` writes for `request`; None when the kernel is rejected
    (`report` says why). The caller closes the worker."""
    deadline = time.monotonic() + timeout
    worker.send(json.dumps(request_to_json(request)))
    files: dict[str, str] = {}
    backward: dict[str, str] = {}
    untraced: dict[str, str] = {}
    first = True
    while True:
        try:
            event = event_from_json(worker.receive(max(deadline - time.monotonic(), 0.01)))
        except WorkerFailure as failure:
            report.add(Check(TRACE, FAIL, *worker_failure(failure, memory_bytes, "tracer")))
            return None
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            report.add(Check(TRACE, FAIL, Reason.TRACER_NOT_PROTOCOL, Said(str(error))))
            return None
        if isinstance(event, Done):
            break
        problem = _unbelievable(event, request, {**files, **untraced}, first)
        first = False
        if problem is not None:
            report.add(Check(TRACE, FAIL, Reason.TRACER_UNBELIEVABLE, problem))
            return None
        if isinstance(event, Check):
            report.add(event)
            if event.status == FAIL:
                return None
        elif isinstance(event, Traced):
            if event.file is None:
                untraced[event.config] = event.error or "the tracer gave no reason"
            else:
                files[event.config] = event.file
                if event.backward_file is not None:
                    backward[event.config] = event.backward_file
        elif isinstance(event, WorkerProblem):
            if event.usage:
                raise TracerUsageError(event.detail)
            report.add(Check(TRACE, FAIL, Reason.HARNESS_ERROR, Said(event.detail)))
            return None
    return _read_programs(files, backward, untraced, request, report)


def trace_source(
    source: str,
    snapshot: TaskSnapshot,
    timeout: float,
    configs: Sequence[str] | None = None,
    *,
    backward: bool = False,
) -> dict[str, bytes]:
    """The programs of a kernel's `source` at `configs` (default: the production shapes), traced
    in a fresh sandboxed tracer, for work no evaluation came before (the autotuner's timings,
    a profile). The tracer reads the task's snapshot, where all it needs travels (the ties the
    harness planned with among it). `backward`: the backward programs instead, on a task that
    asks for gradients (evaluation/gradients.py). WorkerFailure says why there is none at one of
    them."""
    task = snapshot.task
    configs = list(configs or task.configs[:1])
    with tempfile.TemporaryDirectory(prefix="mkt-trace-") as workdir:
        kernel = Path(workdir) / "kernel.py"
        kernel.write_text(source, encoding="utf-8")
        worker = LineWorker(
            python_module_argv(CANDIDATE_WORKER),
            jax_worker_env(),
            cwd=workdir,
            limits=Limits(memory_bytes=TRACER_MEMORY_BYTES, cpu_seconds=int(timeout) + 60),
            sandbox=sandbox_policy(readable=(task.folder,)),
        )
        report = EvalReport(task.task_id, kernel.name, [], device="the tracer, on this machine")
        try:
            request = TraceRequest(
                str(kernel), str(task.folder), configs, workdir, gradients=list(task.gradients)
            )
            traced = trace_programs(worker, request, timeout, report, TRACER_MEMORY_BYTES)
        finally:
            worker.close()
        if traced is None:
            raise WorkerFailure(report.checks[-1].detail, FailureKind.DIED)
        if traced.untraced:
            config, why = next(iter(traced.untraced.items()))
            raise WorkerFailure(f"cannot be traced at {config!r} shapes: {why}", FailureKind.DIED)
        return traced.backward if backward else traced.programs


def _unbelievable(
    event: object, request: TraceRequest, answered: dict[str, str], first: bool
) -> Unbelievable | None:
    """Why a line of the tracer cannot have come from our tracer; None when it may have."""
    if isinstance(event, Check):
        if event.name == SANDBOX and first:
            return None
        if event.status == FAIL and event.name in (TRACE, SANDBOX):
            return None
        return Unbelievable(TracerClaim.JUDGES_CHECK, event.name, event.status)
    if isinstance(event, Traced):
        if event.config not in request.configs or event.config in answered:
            return Unbelievable(TracerClaim.UNASKED_PROGRAM, event.config)
        return None
    if isinstance(event, WorkerProblem):
        return None
    return Unbelievable(TracerClaim.JUDGES_EVENT, type(event).__name__)


def _read_programs(
    files: dict[str, str],
    backward_files: dict[str, str],
    untraced: dict[str, str],
    request: TraceRequest,
    report: EvalReport,
) -> TracedPrograms | None:
    missing = [c for c in request.configs if c not in files and c not in untraced]
    if request.gradients:  # a traced configuration without its backward program
        missing += [c for c in files if c not in backward_files]
    if missing:
        report.add(Check(TRACE, FAIL, Reason.TRACER_NO_PROGRAM, Configs(tuple(missing))))
        return None
    programs: dict[str, bytes] = {}
    backward: dict[str, bytes] = {}
    pairs = [(programs, files), (backward, backward_files if request.gradients else {})]
    for into, named in pairs:
        for config, file in named.items():
            try:
                into[config] = read_program(Path(file), Path(request.out_dir))
            except (OSError, ValueError) as error:
                report.add(Check(TRACE, FAIL, Reason.PROGRAM_REFUSED, At(config, str(error))))
                return None
    return TracedPrograms(programs, untraced, backward)


def read_program(path: Path, directory: Path) -> bytes:
    """A program file the tracer wrote, read only if it is a plain file directly in its own
    `directory` and within the transport's size limit (ValueError otherwise)."""
    if path.parent != directory or path.name in ("", ".", ".."):
        raise ValueError(f"{path} is not in the tracer's directory")
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path.name} is not a plain file")
        if info.st_size > PROGRAM_MAX_BYTES:
            raise ValueError(f"{path.name} holds {info.st_size} bytes, over the limit")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(PROGRAM_MAX_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > PROGRAM_MAX_BYTES:
        raise ValueError(f"{path.name} grew over the limit while it was read")
    return data
