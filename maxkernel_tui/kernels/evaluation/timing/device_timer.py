"""Timing a kernel's carried program on this machine's TPU from the host: one fresh timing
process per measurement, and a calibration record for every measured timing. No jax here.

`DeviceTimer` is the measured autotuner's timer on a TPU VM: it traces each candidate source in
a tracer process of its own (evaluation/tracer/tracing.py), then times the program with the timing
worker (device time from the profiler trace, interleaved with the reference).
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from maxkernel_tui.kernels.device_lock import device_turn
from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingRequest
from maxkernel_tui.kernels.evaluation.tracer.tracing import trace_source
from maxkernel_tui.kernels.perf.calibration import (
    CalibrationRecord,
    default_calibration_file,
    record_measurement,
)
from maxkernel_tui.kernels.snapshot import snapshot_task
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.workers import (
    LineWorker,
    device_worker_env,
    python_module_argv,
    sandbox_policy,
)

TIMING_WORKER = "maxkernel_tui.kernels.evaluation.timing.worker"


def run_timing_worker(
    program: Path,
    task: Task,
    timeout: float,
    repeats: int,
    warmups: int,
    expert: Path | None = None,
) -> TimingAnswer:
    """One timing of the carried `program` at the task's production shapes (beside `expert`,
    interleaved, when given); WorkerFailure when it fails."""
    request = TimingRequest(
        str(program),
        str(task.folder),
        task.configs[0],
        repeats,
        warmups,
        None if expert is None else str(expert),
        list(task.gradients),
    )
    with device_turn(timeout):  # the TPU is this process's alone while it times
        readable = (program.parent, task.folder) + (() if expert is None else (expert,))
        policy = sandbox_policy(readable=readable, accelerator=True)
        worker = LineWorker(python_module_argv(TIMING_WORKER), device_worker_env(), sandbox=policy)
        try:
            return TimingAnswer.from_json(worker.ask(json.dumps(request.to_json()), timeout))
        finally:
            worker.close()


def record_timing(
    answer: TimingAnswer, kernel: str, task_id: str, path: Path | None = None
) -> CalibrationRecord | None:
    """A measured TPU timing with the model's estimate beside it becomes a calibration record
    (the median of the candidate's samples); anything else records nothing."""
    if answer.platform != "tpu" or answer.model is None or not answer.samples.candidate:
        return None
    return record_measurement(
        path or default_calibration_file(),
        kernel=kernel,
        task=task_id,
        device=answer.device,
        point=answer.model,
        measured_s=statistics.median(answer.samples.candidate),
        clock=answer.clock,
    )


class DeviceTimer:
    """Times kernel sources on this machine's TPU (the autotuner's `Timer`)."""

    def __init__(
        self, task: Task, *, repeats: int = 20, warmups: int = 3, timeout: float = 600.0
    ) -> None:
        self.task, self.repeats, self.warmups, self.timeout = task, repeats, warmups, timeout
        self.clock = "device trace on this TPU"

    def time(self, source: str) -> list[float]:
        """Seconds per call of the source's `computation`, measured; records calibration."""
        with tempfile.TemporaryDirectory(prefix="mkt-autotune-") as workdir:
            # the workers read a snapshot of the task: all they need travels with it
            snapshot = snapshot_task(self.task, Path(workdir))
            program = Path(workdir) / "program.bin"
            program.write_bytes(trace_source(source, snapshot, self.timeout)[self.task.configs[0]])
            answer = run_timing_worker(
                program, snapshot.task, self.timeout, self.repeats, self.warmups
            )
        record_timing(answer, "autotune candidate", self.task.task_id)
        self.clock = f"{answer.clock} on {answer.device} ({answer.platform})"
        return answer.samples.candidate
