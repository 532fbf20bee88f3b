"""`Harness.evaluate`: the evaluation as a library call. No jax in this process.

The candidate runs in a fresh pre-started process of its own, in the OS sandbox (scrubbed
environment, namespaces, Landlock, seccomp: kernels/sandbox; a private directory, memory and CPU
limits, killed with its process group on timeout); the reference runs in another sandboxed
process; both read a snapshot of the task taken before either starts (snapshot.py), and the
outputs are compared here. Cheap checks first, stopping at the first failure.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.evaluation.expert_comparison import estimated_expert_check, measured
from maxkernel_tui.kernels.evaluation.failure_text import worker_failure
from maxkernel_tui.kernels.evaluation.options import (
    EvalOptions,
    Probe,
    UsageError,
    extra_configs,
    numerics_plan,
    traced_configs,
)
from maxkernel_tui.kernels.evaluation.protocol import (
    CandidateEvent,
    CandidateRequest,
    Done,
    NumericsRun,
    ProbeStage,
    ReferenceAnswer,
    ReferenceRequest,
    Run,
    TilesRequest,
    TilesRun,
    TraceRequest,
    WorkerProblem,
    event_from_json,
    request_to_json,
)
from maxkernel_tui.kernels.evaluation.provenance import gradient_evidence, verdict_inputs
from maxkernel_tui.kernels.evaluation.reference import cache as reference_cache
from maxkernel_tui.kernels.evaluation.reference.processes import ReferenceWorkers
from maxkernel_tui.kernels.evaluation.reference.tiles import TilesReference
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.evaluation.static.checks import broken_rules
from maxkernel_tui.kernels.evaluation.tiles import plan as tiles_plan
from maxkernel_tui.kernels.evaluation.tiles.verdict import (
    not_sampled,
    projected_outside,
    tiles_check,
    unjudged,
)
from maxkernel_tui.kernels.evaluation.timing.check import timing_check, tpu_present
from maxkernel_tui.kernels.evaluation.tracer.tracing import (
    CANDIDATE_WORKER,
    TracedPrograms,
    TracerUsageError,
    trace_programs,
)
from maxkernel_tui.kernels.report.checks import (
    EDGE,
    FAIL,
    NUMERICS,
    PASS,
    SKIP,
    Check,
    EvalReport,
    numerics_check,
)
from maxkernel_tui.kernels.report.reasons import (
    NoFigures,
    Problems,
    Reason,
    Said,
)
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.snapshot import TaskSnapshot, snapshot_task
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.kernels.workers import (
    Limits,
    LineWorker,
    WarmPool,
    WorkerFailure,
    kernel_worker_env,
    python_module_argv,
    sandbox_policy,
)

GIB = 1024**3
_STAGES = (
    CheckName.TRACE,
    CheckName.TPU_LOWER,
    CheckName.TPU_COMPILE,
    CheckName.PRODUCTION,
    CheckName.NUMERICS,
)


class Harness:
    """Owns the warm pool of candidate processes and the reference process."""

    def __init__(
        self, *, pool_size: int = 1, memory_bytes: int = 8 * GIB, cpu_seconds: int = 3600
    ) -> None:
        self.memory_bytes = memory_bytes
        # Task snapshots, read by both workers and written by neither; so are the production
        # inputs of the tiles check (the task's own, from a fixed seed), read in place.
        self._snapshots = Path(tempfile.mkdtemp(prefix="mkt-snapshots-"))
        production_inputs = reference_cache.inputs_root()
        production_inputs.mkdir(parents=True, exist_ok=True)  # Landlock allows only what exists
        readable = (self._snapshots, production_inputs)
        self._candidates = WarmPool(
            python_module_argv(CANDIDATE_WORKER),
            kernel_worker_env(),
            size=pool_size,
            limits=Limits(memory_bytes=memory_bytes, cpu_seconds=cpu_seconds),
            sandbox=sandbox_policy(readable=readable),
        )
        # Task code runs in a reference process of its own task (reference_workers.py).
        self._references = ReferenceWorkers(readable)
        self._digests: dict[Path, str] = {}  # a snapshot's folder: its task's digest
        self._reference_lock = threading.Lock()
        self._tiles = TilesReference(self._reference_for, self._ask, self._reference_lock)

    def close(self) -> None:
        self._candidates.close()
        self._references.close()
        shutil.rmtree(self._snapshots, ignore_errors=True)

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def evaluate(
        self,
        kernel: KernelSource,
        task: Task,
        options: EvalOptions = EvalOptions(),
        on_check: Callable[[Check], None] | None = None,
    ) -> EvalReport:
        report = EvalReport(
            task.task_id,
            kernel.name,
            [options.target],
            device="numerics on the CPU in TPU interpret mode; compile with libtpu (AOT)",
            on_check=on_check,
            gradients=list(task.gradients),
        )
        snapshot = self._prepare(kernel, task, report)
        if snapshot is None:
            return report
        self._judge(kernel, snapshot, options, report)
        if (change := snapshot.change()) is not None:
            report.add(Check(CheckName.TASK, FAIL, Reason.TASK_CHANGED, Said(str(change))))
        return report

    def _prepare(self, kernel: KernelSource, task: Task, report: EvalReport) -> TaskSnapshot | None:
        """The task's snapshot (the one every worker of this call reads) once the kernel keeps
        the static rules; None (the report says why) otherwise."""
        if not _static_check(kernel, task, report):
            return None
        try:
            snapshot = snapshot_task(task, self._snapshots)
        except (OSError, TaskError) as error:
            report.add(Check(CheckName.TRACE, FAIL, Reason.SNAPSHOT_FAILED, Said(str(error))))
            return None
        self._digests[snapshot.task.folder] = snapshot.digest
        return snapshot

    def _judge(
        self,
        kernel: KernelSource,
        snapshot: TaskSnapshot,
        options: EvalOptions,
        report: EvalReport,
    ) -> None:
        """Every check after the static one, on the snapshot of the task."""
        task = snapshot.task
        runs = numerics_plan(task, options, report)
        report.inputs = verdict_inputs(task, runs)
        extra = extra_configs(task, options)
        if options.edges_only and not extra:
            raise UsageError("an edge-case pass needs edge-case configurations")
        if extra:
            task = task.with_extra_configs(
                tuple(extra)
            )  # so that each is judged with its tolerance
        bench = task.configs[0]
        production = [CHECK] if CHECK in task.configs and bench != CHECK else []
        deadline = time.monotonic() + options.timeout
        configs = traced_configs([(bench, 0), *((c, 0) for c in production), *runs])
        traced = self._trace(kernel.text, snapshot, configs, extra, report, options.timeout)
        if traced is None:
            return
        worker, workdir = self._candidates.take()
        try:
            (workdir / "kernel.py").write_text(kernel.text)  # its private dir, nothing else of ours
            programs = traced.write(workdir)
            backward = traced.write_backward(workdir)
            expert = kernel.is_expert(snapshot)
            tiles_request = tiles_plan.request(
                task,
                options.tile_blocks,
                whole=not options.edges_only and options.config is None,
                source=kernel.text,
                task_digest=snapshot.digest,
            )
            if tiles_request is not None:
                tiles_request, missing = self._tiles.inputs(task, tiles_request)
                if tiles_request is None:
                    report.add(not_sampled(missing))
            events, tiles = self._run_candidate(
                worker,
                workdir,
                task,
                options,
                runs,
                extra,
                report,
                expert,
                tiles_request,
                programs,
                backward,
                traced.untraced,
                max(deadline - time.monotonic(), 1.0),
            )
            # its job is done: free its memory before the reference runs (finally is a no-op then)
            worker.close()
            # derived configurations the kernel's own tiles do not fit are judged at production
            unfit = {c.unfit_config for c in report.checks} - {None}
            if unfit:
                runs = [run for run in runs if run[0] not in unfit]
                report.inputs = verdict_inputs(snapshot.task, runs)
            # production shapes, where the candidate found them affordable (production_checks)
            runs += [key for key in events if key not in runs]
            if report.failure is None and runs:
                self._check_numerics(task, runs, extra, events, report)
            if report.failure is None:
                on_device = tpu_present()  # the timing compares the whole production output
                for run in tiles:
                    expected = self._tiles.expected(task, run)
                    # the device compares the forward's outputs, not the gradients
                    compares = on_device and not run.gradients
                    report.add(tiles_check(task, run, expected, device_compares=compares))
            if (gradients := gradient_evidence(task, report.checks)) is not None:
                report.inputs.append(gradients)
            # an edge-case pass joins a report that was judged already (with_edge_pass)
            judged_before = options.edges_only
            if not judged_before and report.failure is None and (none := unjudged(report)):
                report.add(none)
            if report.failure is None and options.extra_configs and not extra:
                report.add(Check(EDGE, SKIP, Reason.NO_EDGE_CONFIGS))
            if report.failure is None and not options.edges_only:
                # a training kernel is timed forward and backward (its backward program, which
                # runs the forward too) against XLA's jax.vjp of the reference
                timed = backward[bench] if task.gradients and bench in backward else programs[bench]
                check, report.timings = timing_check(
                    Path(timed), kernel.name, task, options.timeout
                )
                report.add(check)
                if (unsettled := projected_outside(report)) is not None:
                    report.add(unsettled)  # left to a device comparison that did not happen
                _compare_with_expert(kernel, expert, snapshot, options, report)
        finally:
            worker.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def probe(self, kernel: KernelSource, task: Task, probe: Probe) -> EvalReport:
        """The checks `probe` asks for, on the candidate `kernel`, in a fresh candidate
        process like an evaluation's."""
        report = EvalReport(
            task.task_id,
            kernel.name,
            [probe.target],
            device=f"a probe at configuration {probe.config}: CPU, TPU interpret mode, libtpu",
        )
        snapshot = self._prepare(kernel, task, report)
        if snapshot is None:
            return report
        runs = [(probe.config, probe.seed)] if probe.through == ProbeStage.NUMERICS else []
        deadline = time.monotonic() + probe.timeout
        traced = self._trace(kernel.text, snapshot, [probe.config], {}, report, probe.timeout)
        if traced is None:
            return report
        worker, workdir = self._candidates.take()
        try:
            request = CandidateRequest(
                kernel=str(workdir / "kernel.py"),
                task=str(snapshot.task.folder),
                target=probe.target,
                bench_config=probe.config,
                runs=runs,
                out_dir=str(workdir),
                probe=probe.through,
                task_digest=snapshot.digest,
                programs=traced.write(workdir),
                untraced=traced.untraced,
                gradients=list(snapshot.task.gradients),
                backward_programs=traced.write_backward(workdir),
            )
            timeout = max(deadline - time.monotonic(), 1.0)
            events, _ = self._run_request(worker, request, timeout, report)
            worker.close()
            if report.failure is None and runs:
                self._check_numerics(snapshot.task, runs, {}, events, report)
        finally:
            worker.close()
            shutil.rmtree(workdir, ignore_errors=True)
        return report

    def _trace(
        self,
        source: str,
        snapshot: TaskSnapshot,
        configs: list[str],
        extra: dict[str, dict[str, int]],
        report: EvalReport,
        timeout: float,
    ) -> TracedPrograms | None:
        """The candidate's programs at `configs`, from a process of its own that does nothing
        else (evaluation/tracer/tracing.py); None when the kernel is rejected there."""
        worker, workdir = self._candidates.take()
        try:
            (workdir / "kernel.py").write_text(source)  # it never sees its original folder
            request = TraceRequest(
                kernel=str(workdir / "kernel.py"),
                task=str(snapshot.task.folder),
                configs=configs,
                out_dir=str(workdir),
                extra_configs=extra,
                task_digest=snapshot.digest,
                gradients=list(snapshot.task.gradients),
            )
            try:
                return trace_programs(worker, request, timeout, report, self.memory_bytes)
            except TracerUsageError as error:
                raise UsageError(str(error)) from None
        finally:
            worker.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def _run_candidate(
        self,
        worker: LineWorker,
        workdir: Path,
        task: Task,
        options: EvalOptions,
        runs: list[Run],
        extra: dict[str, dict[str, int]],
        report: EvalReport,
        expert_baseline: bool,
        tiles_request: TilesRequest | None,
        programs: dict[str, str],
        backward: dict[str, str],
        untraced: dict[str, str],
        timeout: float,
    ) -> tuple[dict[Run, NumericsRun], list[TilesRun]]:
        request = CandidateRequest(
            kernel=str(workdir / "kernel.py"),
            task=str(task.folder),
            target=options.target,
            bench_config=task.configs[0],
            runs=runs,
            out_dir=str(workdir),
            extra_configs=extra,
            detect_races=options.detect_races,
            require_pallas=options.require_pallas,
            expert_baseline=expert_baseline,
            edges_only=options.edges_only,
            tiles=tiles_request,
            task_digest=self._digests[task.folder],
            programs=programs,
            untraced=untraced,
            gradients=list(task.gradients),
            backward_programs=backward,
        )
        return self._run_request(worker, request, timeout, report)

    def _run_request(
        self, worker: LineWorker, request: CandidateRequest, timeout: float, report: EvalReport
    ) -> tuple[dict[Run, NumericsRun], list[TilesRun]]:
        """The candidate's checks into `report`, and the outputs of its numerics and production
        tiles runs."""
        outputs: dict[Run, NumericsRun] = {}
        tiles: list[TilesRun] = []
        deadline = time.monotonic() + timeout
        stage_started = time.monotonic()
        worker.send(json.dumps(request_to_json(request)))
        while True:
            try:
                event = event_from_json(worker.receive(max(deadline - time.monotonic(), 0.01)))
            except WorkerFailure as failure:
                seconds = round(time.monotonic() - stage_started, 3)
                why, figures = worker_failure(failure, self.memory_bytes, "candidate")
                report.add(Check(_stage_in_progress(report), FAIL, why, figures, seconds))
                return outputs, tiles
            if isinstance(event, Check):
                stage_started = time.monotonic()
            if isinstance(event, TilesRun):
                tiles.append(event)
            elif _take(event, report, outputs):
                return outputs, tiles

    def _reference_for(self, task: Task) -> LineWorker:
        """The reference worker of the snapshot `task`; the caller holds the reference lock."""
        return self._references.worker(self._digests[task.folder])

    def _ask(self, reference: LineWorker, request: ReferenceRequest) -> ReferenceAnswer:
        """The reference worker's answer; the caller holds the reference lock."""
        try:
            raw = reference.ask(json.dumps(request.to_json()), timeout=1800)
            return ReferenceAnswer.from_json(raw)
        except WorkerFailure as failure:
            return ReferenceAnswer(error=f"reference process failed: {failure}")

    def _check_numerics(
        self,
        task: Task,
        runs: list[Run],
        extra: dict[str, dict[str, int]],
        candidate_runs: dict[Run, NumericsRun],
        report: EvalReport,
    ) -> None:
        reference_started = time.monotonic()
        with self._reference_lock:
            # where the reference worker may write; no candidate can
            reference_worker = self._reference_for(task)
            assert reference_worker.directory is not None
            reference_dir = Path(tempfile.mkdtemp(dir=reference_worker.directory))
            request = ReferenceRequest(
                str(task.folder), runs, str(reference_dir), extra, gradients=list(task.gradients)
            )
            answer = self._ask(reference_worker, request)
        try:
            self._compare(task, runs, extra, candidate_runs, answer, reference_started, report)
        finally:
            shutil.rmtree(reference_dir, ignore_errors=True)

    def _compare(
        self,
        task: Task,
        runs: list[Run],
        extra: dict[str, dict[str, int]],
        candidate_runs: dict[Run, NumericsRun],
        answer: ReferenceAnswer,
        reference_started: float,
        report: EvalReport,
    ) -> None:
        if answer.error is not None:
            report.add(Check(CheckName.NUMERICS, FAIL, Reason.REFERENCE_FAILED, Said(answer.error)))
            return
        reference_seconds = time.monotonic() - reference_started
        reference_runs = {r.key: r for r in answer.runs}

        def group(config: str) -> CheckName:
            return numerics_check(config, edge=config in extra)

        # in the order the runs were planned: a run the judge added (production shapes, or check
        # shapes where the kernel could not be traced) is judged after the ones asked for
        for check_name in dict.fromkeys(group(config) for config, _ in runs):
            selected = [run for run in runs if group(run[0]) == check_name]
            started = time.monotonic()
            from maxkernel_tui.kernels.evaluation.judged_runs import (
                compare_runs,
            )  # NumPy: not at the UI's start-up

            check = compare_runs(check_name, task, selected, candidate_runs, reference_runs)
            # the kernel's own runs, plus the reference and the comparison
            kernel_seconds = sum(
                candidate_runs[run].seconds for run in selected if run in candidate_runs
            )
            check.seconds = round(
                kernel_seconds + reference_seconds + time.monotonic() - started, 3
            )
            reference_seconds = 0.0
            report.add(check)
            if check.status == FAIL:
                return


def _compare_with_expert(
    kernel: KernelSource,
    is_expert: bool,
    snapshot: TaskSnapshot,
    options: EvalOptions,
    report: EvalReport,
) -> None:
    """The kernel beside the task's expert: measured with the timing on a TPU, else estimated
    (on this evaluation's snapshot)."""
    expert = snapshot.task.expert_path
    if expert is None or is_expert:
        return
    report.expert = measured(expert.name, report.timings)
    if report.expert is None and not tpu_present():
        check, report.expert = estimated_expert_check(
            kernel, snapshot, options.target, options.timeout
        )
        report.add(check)


def _static_check(kernel: KernelSource, task: Task, report: EvalReport) -> bool:
    if (refusal := kernel.refusal) is not None:
        report.add(refusal)
        return False
    start = time.monotonic()
    problems = broken_rules(kernel.text, kernel.name, task.entry_points)
    seconds = round(time.monotonic() - start, 3)
    if problems:
        broken = Problems(tuple(problems))
        report.add(Check(CheckName.STATIC, FAIL, Reason.STATIC_RULES_BROKEN, broken, seconds))
        return False
    report.add(Check(CheckName.STATIC, PASS, Reason.STATIC_OK, NoFigures(), seconds))
    return True


def _take(event: CandidateEvent, report: EvalReport, outputs: dict[Run, NumericsRun]) -> bool:
    """Record one event of the candidate worker; True when it has nothing more to say."""
    if isinstance(event, Check):
        report.add(event)
        return event.status == FAIL
    if isinstance(event, NumericsRun):
        outputs[event.key] = event
        return False
    if isinstance(event, WorkerProblem):
        if event.usage:
            raise UsageError(event.detail)
        report.add(
            Check(_stage_in_progress(report), FAIL, Reason.HARNESS_ERROR, Said(event.detail))
        )
        return False
    return isinstance(event, Done)


def _stage_in_progress(report: EvalReport) -> CheckName:
    done = {c.name for c in report.checks}
    return next((stage for stage in _STAGES if stage not in done), NUMERICS)
