"""`profile_kernel`: the profile of a candidate as a library call. No jax in this process.

The candidate's code runs only in the evaluation's sandboxed tracer (evaluation/tracer/tracing.py),
after the same static rules as the evaluation; the profile worker analyses and runs the programs
the tracer carried, never the candidate's module, so the figures are not the kernel's to write.
Both read a snapshot of the task (snapshot.py), as an evaluation's workers do: what
they need travels with it (a derived task's traced ties among it), never a path into the user's
cache, which their sandbox refuses.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from maxkernel_tui.kernels.device_lock import device_turn
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.evaluation.static.checks import static_problems
from maxkernel_tui.kernels.evaluation.timing.check import tpu_present
from maxkernel_tui.kernels.evaluation.tracer.tracing import trace_source, write_programs
from maxkernel_tui.kernels.perf.analysis import (
    ProfileAnswer,
    ProfileRequest,
    ReferenceCost,
    trace_config,
)
from maxkernel_tui.kernels.perf.calibration import Calibration, load_calibration
from maxkernel_tui.kernels.perf.model import estimate, warnings_for
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.perf.xla_model import XLA_PRECISIONS
from maxkernel_tui.kernels.snapshot import TaskSnapshot, snapshot_task
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.kernels.workers import (
    Limits,
    LineWorker,
    WorkerFailure,
    device_worker_env,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

DEFAULT_TARGETS = ("v5e", "v6e")
GIB = 1024**3


@dataclass(frozen=True)
class ProfileOptions:
    """How a kernel is profiled: the TPU generations it is estimated for, and the timings
    measured on TPUs that calibrate the model (`calibration_file`; None: the model alone)."""

    targets: tuple[str, ...] = DEFAULT_TARGETS
    calibration_file: Path | None = None


class ProfileError(Exception):
    """The profile could not be made (static rules, a crash, a timeout); the message says why."""


def profile_kernel(
    kernel: KernelSource,
    task: Task | TaskSnapshot,
    *,
    targets: tuple[str, ...] = DEFAULT_TARGETS,
    trace_root: Path,
    calibration_file: Path | None = None,
    timeout: float = 600.0,
    trace: bool = True,
    reference_costs: dict[str, ReferenceCost] | None = None,
    tolerance_passes: int | None = None,
) -> ProfileSummary:
    """`task`: a task (snapshotted for this profile), or the snapshot an evaluation took, which
    every worker of the profile then reads. `trace=False`: the static analysis and the model's
    estimates only (no run of the kernel); `reference_costs`: the reference's XLA costs per
    target from an earlier profile (no compile); `tolerance_passes`: the MXU passes XLA needs
    for the task's tolerance, from an earlier profile (no emulation)."""
    with contextlib.ExitStack() as stack:
        snapshot = task if isinstance(task, TaskSnapshot) else _snapshot(task, stack)
        task = snapshot.task
        source = _profilable_source(kernel, targets, task.entry_points)
        traced = trace_config(task, tpu_present()) if trace else None
        workdir, programs = _carried(source, snapshot, traced, "mkt-profile-", timeout)
        request = ProfileRequest(
            programs=programs,
            task=str(task.folder),
            targets=list(targets),
            trace_dir=str(trace_root / f"{task.task_id}-{time.strftime('%Y%m%d-%H%M%S')}"),
            trace=trace,
            reference_costs=reference_costs or {},
            tolerance_passes=tolerance_passes,
            gradients=list(task.gradients),
        )
        answer = _ask_worker(workdir, request, timeout)
        summary = summarize(task.task_id, kernel.name, answer, targets, calibration_file)
        # the expert is read from the copy; the kernel may be the task's own expert
        expert = task.expert_path
        # an expert is a forward kernel: nothing to set beside a forward-and-backward estimate
        if expert is not None and not kernel.is_expert(snapshot) and not task.gradients:
            _add_expert(summary, snapshot, expert, request, answer, timeout, calibration_file)
    return summary


def _snapshot(task: Task, stack: contextlib.ExitStack) -> TaskSnapshot:
    """A snapshot of `task` for one profile, removed when `stack` closes."""
    copies = stack.enter_context(tempfile.TemporaryDirectory(prefix="mkt-profile-task-"))
    try:
        return snapshot_task(task, Path(copies))
    except (OSError, TaskError) as error:
        raise ProfileError(f"cannot snapshot the task: {error}") from None


def _add_expert(
    summary: ProfileSummary,
    snapshot: TaskSnapshot,
    expert: Path,
    request: ProfileRequest,
    answer: ProfileAnswer,
    timeout: float,
    calibration_file: Path | None,
) -> None:
    """The task's expert baseline estimated beside the kernel (static analysis, no trace)."""
    try:
        source = expert.read_text(encoding="utf-8")
        workdir, programs = _carried(source, snapshot, None, "mkt-profile-expert-", timeout)
        expert_request = replace(
            request,
            programs=programs,
            trace=False,
            reference_costs=answer.reference_costs,
            tolerance_passes=answer.tolerance_passes,
        )
        expert_answer = _ask_worker(workdir, expert_request, timeout)
    except (OSError, ProfileError) as error:
        summary.problems.append(f"the expert {expert.name}: {error}")
        return
    targets = tuple(request.targets)
    expert_summary = summarize(
        summary.task_id, expert.name, expert_answer, targets, calibration_file
    )
    summary.expert = expert.name
    summary.expert_estimates = expert_summary.estimates


def _carried(
    source: str, snapshot: TaskSnapshot, trace_at: str | None, prefix: str, timeout: float
) -> tuple[Path, dict[str, str]]:
    """The kernel's programs at production shapes (and at `trace_at`, where its trace runs),
    traced in the sandboxed tracer and written into a new directory for the profile worker
    (named with `prefix`; _ask_worker removes it): the directory and configuration: file."""
    bench = snapshot.task.configs[0]
    configs = list(dict.fromkeys(c for c in (bench, trace_at) if c is not None))
    try:
        # a training kernel's figures are its backward program's: forward and backward kernels
        backward = bool(snapshot.task.gradients)
        programs = trace_source(source, snapshot, timeout, configs, backward=backward)
    except WorkerFailure as failure:
        raise ProfileError(f"the kernel could not be traced: {failure}") from None
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    return workdir, write_programs(programs, workdir)


def _profilable_source(
    kernel: KernelSource, targets: tuple[str, ...], entry_points: tuple[str, ...]
) -> str:
    """The kernel's source, once the targets are known and it keeps the static rules."""
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise ProfileError(
            f"no performance figures for TPU {', '.join(unknown)}; known: {', '.join(TARGETS)}"
        )
    if kernel.problem is not None:
        raise ProfileError(kernel.problem)
    problems = static_problems(kernel.text, kernel.name, entry_points)
    if problems:
        raise ProfileError("the kernel breaks the static rules: " + "; ".join(problems))
    return kernel.text


def _ask_worker(workdir: Path, request: ProfileRequest, timeout: float) -> ProfileAnswer:
    """One profile in a worker process of its own, in `workdir` (removed afterwards)."""
    # On a TPU VM a traced profile runs on the TPU (a device trace, its DMA share), in its turn;
    # else on the CPU.
    on_tpu = request.trace and tpu_present()
    env = device_worker_env() if on_tpu else jax_worker_env()
    try:
        with device_turn(timeout) if on_tpu else contextlib.nullcontext():
            worker = LineWorker(
                python_module_argv("maxkernel_tui.kernels.evaluation.profiling.worker"),
                dict(env, TMPDIR=str(workdir)),
                cwd=str(workdir),
                limits=Limits(memory_bytes=8 * GIB),
                sandbox=sandbox_policy(
                    readable=(request.task,),
                    writable=(Path(request.trace_dir).parent,),
                    accelerator=on_tpu,
                ),
            )
            try:
                answer = worker.ask(json.dumps(request.to_json()), timeout)
            finally:
                worker.close()
    except WorkerFailure as failure:
        raise ProfileError(f"the profile process failed: {failure}") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if "error" in answer:  # the worker's own failure, in place of an answer
        raise ProfileError(answer["error"])
    return ProfileAnswer.from_json(answer)


def summarize(
    task_id: str,
    kernel: str,
    answer: ProfileAnswer,
    targets: tuple[str, ...],
    calibration_file: Path | None = None,
) -> ProfileSummary:
    calibration = load_calibration(calibration_file) if calibration_file else Calibration()
    estimates, warnings, problems = [], {}, []
    for name in targets:
        target = TARGETS[name]
        cost = answer.reference_costs.get(name)
        if cost is not None and cost.error is not None:
            problems.append(f"XLA cost of the reference on {name}: {cost.error}")
            cost = None
        estimates.append(
            estimate(
                answer.kernels,
                target,
                cost,
                calibration,
                answer.io_bytes,
                XLA_PRECISIONS[answer.written_passes],
                XLA_PRECISIONS.get(answer.tolerance_passes or 0),
                answer.outside,
            )
        )
        warnings[name] = [w for k in answer.kernels for w in warnings_for(k, target)]
    if not answer.kernels:
        problems.append("no pallas_call in the program: nothing for the kernel model to analyse")
    return ProfileSummary(
        task_id,
        kernel,
        answer.config,
        answer.kernels,
        estimates,
        warnings,
        answer.reference_costs,
        answer.trace,
        problems,
        calibration.counts(targets),
        gradients=answer.gradients,
    )
