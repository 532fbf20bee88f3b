"""The candidate worker: one job in a fresh process, then it exits. Imports jax.

    python -m maxkernel_tui.kernels.evaluation.judge.worker

Started ahead of time by the harness's pool; prints `{"ready": true}` once jax is imported,
then reads ONE request line and answers with event lines (evaluation/protocol.py). A job is
one of two, always in two processes, so that the process that judges a kernel never ran it:

- {"trace": TraceRequest}: evaluation/tracer/candidate.py imports the candidate and writes its
  programs as bytes; that process is the candidate's, and nothing it says but a failure counts.
- {"judge": CandidateRequest}: this module. It never imports the candidate: it loads the
  carried programs (evaluation/tracer/transport.py), checks each against the task's inputs and
  outputs at its configuration, then runs every check on them: the Pallas rule, TPU lowering and
  compile, the production defences, the sampled production tiles when asked
  (evaluation/tiles/sampled_run.py, on the production inputs kept in the cache) and a `run` per
  numerics run (outputs saved as .npy in the request's directory), then `done`.
The comparison with the reference happens in the caller, not here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental.pallas import tpu as pltpu
from jax.extend.core import jaxpr_as_fun

from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.evaluation import gradients
from maxkernel_tui.kernels.evaluation.failure_text import first_lines
from maxkernel_tui.kernels.evaluation.judge import backward
from maxkernel_tui.kernels.evaluation.judge.outputs import save_outputs
from maxkernel_tui.kernels.evaluation.judge.outside import outside_pallas
from maxkernel_tui.kernels.evaluation.judge.subject import Refused, Subject, Untraced
from maxkernel_tui.kernels.evaluation.protocol import (
    CandidateEvent,
    CandidateRequest,
    Done,
    NumericsRun,
    ProbeStage,
    Run,
    TilesRequest,
    TilesRun,
    TraceRequest,
    WorkerProblem,
    event_to_json,
    request_from_json,
)
from maxkernel_tui.kernels.evaluation.tiles import sampled_run as production_tiles
from maxkernel_tui.kernels.evaluation.tracer.candidate import trace_candidate
from maxkernel_tui.kernels.evaluation.tracer.carried import (
    avals_text,
    widened_outputs,
)
from maxkernel_tui.kernels.evaluation.tracer.transport import interpreted
from maxkernel_tui.kernels.evaluation.work import kernel_work, production_checks
from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import (
    FAIL,
    PASS,
    SKIP,
    Check,
    numerics_check,
)
from maxkernel_tui.kernels.report.reasons import (
    Defence,
    DefenceName,
    DefenceOutcome,
    Figures,
    NoFigures,
    Reason,
    Said,
    Target,
    Unfit,
    WorkShare,
)
from maxkernel_tui.kernels.report.status import CheckName, CheckStatus
from maxkernel_tui.kernels.sandbox.confine import drain_refusals, use_task_cache
from maxkernel_tui.kernels.sandbox.report import SANDBOX, sandbox_check
from maxkernel_tui.kernels.targets import TpuTarget
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY

# What TPU interpret mode raises for a kernel's own faults in a sampled production run.
_KERNEL_FAULTS = ("Out-of-bounds", "out-of-bounds", "out of bounds", "RACE DETECTED")


def _emit(event: CandidateEvent) -> None:
    tried = drain_refusals()  # first, so that a failure the sandbox caused is explained
    if tried:
        refused = Said("; ".join(tried))
        reply(event_to_json(Check(SANDBOX, FAIL, Reason.SANDBOX_REFUSED, refused)))
    reply(event_to_json(event))


def _passed(check: Check) -> bool:
    _emit(check)
    return check.status == PASS


def _check(
    name: CheckName, status: CheckStatus, reason: Reason, figures: Figures, start: float
) -> bool:
    _emit(Check(name, status, reason, figures, round(time.perf_counter() - start, 3)))
    return status == PASS


def evaluate_candidate(request: CandidateRequest) -> None:
    """The trace check on the carried programs, TPU lowering, TPU compile, the production
    defences, then the candidate's outputs for each numerics run."""
    start = time.perf_counter()
    try:
        target = aot.target_for(request.target)
    except KeyError as error:
        _emit(WorkerProblem(str(error.args[0]), usage=True))
        return
    subject = _load(request)
    if (
        _trace_check(subject, start, request)
        and _lower_check(subject, target)
        and request.probe != ProbeStage.TPU_LOWER
        and _compile_check(subject, target)
        and request.probe != ProbeStage.TPU_COMPILE
    ):
        # a probe is feedback at one configuration: the production defences are a verdict's
        runs = (
            request.runs
            if request.probe != ProbeStage.NONE
            else _production_check(subject, request)
        )
        if runs is not None:
            # a full production run (affordable shapes) judges more than a sample would
            if request.tiles is not None and request.bench_config not in {c for c, _ in runs}:
                _tiles_run(subject, request, request.tiles)
                if subject.task.gradients:  # the backward's kernels, sampled the same way
                    _tiles_run(subject, request, request.tiles, of_backward=True)
            _numerics_runs(subject, request, runs)


def _load(request: CandidateRequest) -> Subject:
    """The task, its reference and the production shapes; the programs load when checked."""
    task = load_task(request.task).with_gradients(tuple(request.gradients))
    reference = runtime.load_reference(task)
    task = runtime.with_extra_configs(task, reference, request.extra_configs)
    specs, static, expected = runtime.io_specs(task, reference, request.bench_config)
    return Subject(
        task,
        reference,
        request.programs,
        request.untraced,
        specs,
        static,
        expected,
        request.bench_config,
        backward_files=request.backward_programs,
        at=gradients.positions(task, len(specs)) if task.gradients else (),
    )


def _trace_check(subject: Subject, start: float, request: CandidateRequest) -> bool:
    try:
        traced = subject.program(subject.bench)
    except Refused as refusal:
        return _check(CheckName.TRACE, FAIL, Reason.TRACE_REFUSED, Said(str(refusal)), start)
    if not request.require_pallas:
        outputs = Said(_outputs_text(subject, traced))
        return _check(CheckName.TRACE, PASS, Reason.SANITY_RUN, outputs, start)
    if not _pallas_check(subject, traced, start, request.expert_baseline):
        return False
    return not subject.task.gradients or _passed(backward.trace_check(subject))


def _pallas_check(subject: Subject, traced: Any, start: float, expert: bool) -> bool:
    """The heavy work runs inside Pallas kernels, not in XLA around them."""
    work = measure(traced)
    if not work.has_pallas:
        return _check(CheckName.TRACE, FAIL, Reason.NO_PALLAS_CALL, NoFigures(), start)
    static = subject.static
    reference = jax.make_jaxpr(lambda *d: subject.reference.computation(*d, *static))
    outside = outside_pallas(work, measure(reference(*subject.specs)))
    if outside and expert:
        reported = dataclasses.replace(outside, outputs=_outputs_text(subject, traced))
        return _check(CheckName.TRACE, PASS, Reason.EXPERT_WORK_OUTSIDE_PALLAS, reported, start)
    if outside:
        return _check(CheckName.TRACE, FAIL, Reason.HEAVY_WORK_OUTSIDE_PALLAS, outside, start)
    share = WorkShare(
        len(work.pallas_calls), work.xla_flops, work.xla_reduced, _outputs_text(subject, traced)
    )
    return _check(CheckName.TRACE, PASS, Reason.PALLAS_HOLDS_THE_WORK, share, start)


def _outputs_text(subject: Subject, traced: Any) -> str:
    """The program's outputs, and how they are compared where their types are not the
    reference's (a JAXBench task's outputs, compared as JAXBench's harness compares)."""
    text = f"outputs {avals_text(traced.out_avals)}"
    widened = widened_outputs(subject.task, traced.out_avals, subject.expected)
    return f"{text}; {widened}" if widened else text


def _lower_check(subject: Subject, target: TpuTarget) -> bool:
    start = time.perf_counter()
    try:
        for function, specs in backward.production_programs(subject):
            program = jax.jit(function, keep_unused=True)
            with aot.on_target(target):
                program.trace(*specs).lower(lowering_platforms=("tpu",))
    except Exception as error:
        said = Said(first_lines(error))
        return _check(CheckName.TPU_LOWER, FAIL, Reason.LOWERING_FAILED, said, start)
    return _check(CheckName.TPU_LOWER, PASS, Reason.LOWERED, NoFigures(), start)


def _compile_check(subject: Subject, target: TpuTarget) -> bool:
    start = time.perf_counter()
    try:
        for function, specs in backward.production_programs(subject):
            aot.compile_for_tpu(function, specs, target)
    except Exception as error:
        failed = Target(target.name, first_lines(error))
        return _check(CheckName.TPU_COMPILE, FAIL, Reason.COMPILE_FAILED, failed, start)
    return _check(CheckName.TPU_COMPILE, PASS, Reason.COMPILED, Target(target.name), start)


def _production_check(subject: Subject, request: CandidateRequest) -> list[Run] | None:
    """The defences of evaluation/work/production_checks.py; the numerics runs to do (with
    production shapes added where they are affordable), or None when a defence rejects the
    kernel."""
    start = time.perf_counter()
    task, bench = subject.task, request.bench_config
    if CHECK not in task.configs or bench == CHECK:
        _check(production_checks.CHECK_NAME, SKIP, Reason.NO_CHECK_CONFIG, NoFigures(), start)
        return request.runs

    def at(config: str) -> production_checks.Shapes:
        specs, static = runtime.input_specs(task, subject.reference, config)
        return kernel_work.measure_shapes(
            config,
            subject.function(config),
            lambda *d: subject.reference.computation(*d, *static),
            specs,
        )

    try:
        check = at(CHECK)  # first: a refused program rejects the kernel, below
    except Refused as refusal:
        if isinstance(refusal, Untraced) and request.runs:
            # judged where it fails: a numerics run at check shapes, with the kernel's reason
            why = Said(str(refusal))
            _check(production_checks.CHECK_NAME, SKIP, Reason.NO_PROGRAM_AT_CHECK, why, start)
            at_check = CHECK in {c for c, _ in request.runs}
            runs = request.runs if at_check else [*request.runs, (CHECK, request.runs[0][1])]
            return _untraced_fitting(subject, request, runs, at) if task.derived else runs
        refused = Said(str(refusal))
        _check(production_checks.CHECK_NAME, FAIL, Reason.PRODUCTION_REFUSED, refused, start)
        return None
    try:
        production = at(bench)
        findings = production_checks.judge(
            production,
            check,
            on_tpu=jax.default_backend() == "tpu",
            tiles=request.tiles is not None,
        )
    except Exception as error:  # a program the analysis cannot read is judged by numerics alone
        why = Said(first_lines(error))
        _check(production_checks.CHECK_NAME, SKIP, Reason.DEFENCES_UNMEASURABLE, why, start)
        return request.runs
    _emit(findings.to_check(time.perf_counter() - start))
    if findings.failure is not None:
        return None
    if task.gradients and not _passed(backward.defences(subject)):
        return None
    numerics = next(d for d in findings.defences if d.name == DefenceName.NUMERICS)
    runs = request.runs
    if task.derived:  # on a declared configuration, a tiling that does not fit is the kernel's
        measured = {CHECK: check}
        runs = _fitting_runs(subject, request, runs, production.candidate, measured, at, numerics)
    if numerics.outcome == DefenceOutcome.SCHEDULED and request.runs and not request.edges_only:
        return [*runs, (bench, request.runs[0][1])]
    return runs


def _untraced_fitting(
    subject: Subject,
    request: CandidateRequest,
    runs: list[Run],
    at: Callable[[str], production_checks.Shapes],
) -> list[Run]:
    """`runs` on a derived task with no program at check shapes, less the derived
    configurations the production program's tiles do not fit (_fitting_runs); production shapes
    added where they run in full."""
    try:
        production = at(subject.bench)
    except Exception:  # no production program to read: the numerics runs judge the kernel
        return runs
    on_tpu = jax.default_backend() == "tpu"
    tiles = request.tiles is not None
    numerics = production_checks.numerics_defence(production, on_tpu=on_tpu, tiles=tiles)
    runs = _fitting_runs(subject, request, runs, production.candidate, {}, at, numerics)
    if numerics.outcome == DefenceOutcome.SCHEDULED and not request.edges_only:
        return [*runs, (subject.bench, request.runs[0][1])]
    return runs


def _fitting_runs(
    subject: Subject,
    request: CandidateRequest,
    runs: list[Run],
    production: production_checks.ProgramWork,
    measured: dict[str, production_checks.Shapes],
    at: Callable[[str], production_checks.Shapes],
    numerics: Defence,
) -> list[Run]:
    """`runs` less those at derived configurations whose program cannot run the kernel's own
    tiling (production_checks.tiles_misfit), or, where the kernel could not be traced there,
    whose sizes the production program's blocks do not fit (mapped_misfit): each of those gets
    a skipped check that says so, and the kernel's numerics are judged at production instead."""
    unfit: set[str] = set()
    for config in dict.fromkeys(c for c, _ in runs if c != request.bench_config):
        start = time.perf_counter()
        try:
            derived = measured[config] if config in measured else at(config)
            misfit = production_checks.tiles_misfit(production, derived.candidate)
        except Untraced as untraced:
            sizes = _derived_sizes(subject.task, config)
            misfit = production_checks.mapped_misfit(production, sizes)
            misfit = misfit and dataclasses.replace(misfit, untraced=str(untraced))
        except Exception:  # no program measurable there: its numerics run judges the kernel
            continue
        if not misfit:
            continue
        unfit.add(config)
        name = numerics_check(config, edge=config in request.extra_configs)
        left = Unfit(config, misfit, numerics.outcome, request.edges_only)
        _check(name, SKIP, Reason.UNFIT_TILES, left, start)
    return [run for run in runs if run[0] not in unfit]


def _derived_sizes(task: Any, config: str) -> dict[int, int]:
    """Each production size the derivation moves to one size at `config`: that size."""
    sizes = task.derivation.sizes if task.derivation is not None else {}
    production, there = sizes.get(task.configs[0], {}), sizes.get(config, {})
    moves: dict[int, set[int]] = {}
    for name, value in production.items():
        if name in there:
            moves.setdefault(value, set()).add(there[name])
    return {value: next(iter(to)) for value, to in moves.items() if len(to) == 1}


def _numerics_runs(subject: Subject, request: CandidateRequest, runs: list[Run]) -> None:
    task, reference = subject.task, subject.reference
    params = pltpu.InterpretParams(
        uninitialized_memory="nan",
        out_of_bounds_reads="raise",
        detect_races=request.detect_races,
    )
    # One jitted program per configuration: the seeds of a configuration differ only in their
    # inputs, so the interpreter's program is compiled once.
    programs: dict[str, Any] = {}
    backward_programs: dict[str, Any] = {}
    for config, seed in runs:
        start = time.perf_counter()
        files: list[str] | None = None
        gradient_files: list[str] | None = None
        races: bool | None = None
        error: str | None = None
        try:
            dynamic, static = runtime.make_inputs(task, reference, config, seed)
            _, traced_static = runtime.input_specs(task, reference, config)
            if repr(static) != repr(traced_static):  # the program was traced with the latter
                raise RuntimeError(
                    f"get_inputs gives other static arguments for seed {seed} ({static!r}) "
                    f"than the program was traced with ({traced_static!r})"
                )
            program = programs.get(config)
            if program is None:
                run = jaxpr_as_fun(interpreted(subject.program(config), params))
                program = programs[config] = jax.jit(lambda *d, run=run: run(*jax.tree.leaves(d)))
            output = jax.block_until_ready(program(*dynamic))
            files = save_outputs(Path(request.out_dir), f"candidate-{config}-{seed}", output)
            races = _races_found() if request.detect_races else None
            if task.gradients:
                grads = backward.gradients_run(
                    subject, config, seed, dynamic, params, backward_programs
                )
                stem = f"candidate-grad-{config}-{seed}"
                gradient_files = save_outputs(Path(request.out_dir), stem, grads)
        except Refused as refusal:
            error = str(refusal)
        except Exception as failure:
            error = first_lines(failure)
            pltpu.reset_tpu_interpret_mode_state()  # the interpreter keeps state after an error
        seconds = round(time.perf_counter() - start, 3)
        run = NumericsRun(config, seed, files, error, races, seconds)
        _emit(dataclasses.replace(run, gradient_files=gradient_files))


def _tiles_run(
    subject: Subject, request: CandidateRequest, tiles: TilesRequest, *, of_backward: bool = False
) -> None:
    """Sampled output tiles of the kernels at production shapes (evaluation/tiles/sampled_run.py),
    saved for the harness to compare with the reference; `of_backward`: of the backward program,
    on the production inputs and the input seed's cotangents (its outputs are the gradients)."""
    start = time.perf_counter()
    config = request.bench_config
    named = list(subject.task.gradients) if of_backward else []
    run = functools.partial(TilesRun, config, tiles.input_seed, tiles.sample_seed, gradients=named)
    params = pltpu.InterpretParams(uninitialized_memory="nan", out_of_bounds_reads="raise")
    stem = "tiles-backward" if of_backward else "tiles"
    try:
        dynamic = _production_inputs(subject, tiles.inputs)
        leaves = jax.tree.leaves(dynamic)
        program = subject.program(subject.bench)
        if of_backward:
            program = subject.backward(subject.bench)
            leaves += gradients.cotangents(subject.expected, tiles.input_seed)
        sampled = production_tiles.run_sampled(
            program,
            leaves,
            np.random.default_rng(tiles.sample_seed),
            random_blocks=tiles.random_blocks,
            params=params,
        )
        del dynamic, leaves
        values: list[str] = []
        indices: list[str] = []
        for number, decided in enumerate(sampled.decided):
            chosen = decided.values.astype(np.float32)
            for files, array, part in (
                (values, chosen, "values"),
                (indices, decided.indices, "indices"),
            ):
                path = Path(request.out_dir) / f"{stem}-{part}-{number}.npy"
                np.save(path, array, allow_pickle=False)
                files.append(str(path))
        event = run(
            values=values,
            indices=indices,
            kernels=[k.describe() for k in sampled.kernels],
            blocks=sum(k.blocks for k in sampled.kernels),
            of_blocks=sum(k.of_blocks for k in sampled.kernels),
            classes=sum(k.classes for k in sampled.kernels),
            shapes=[list(decided.shape) for decided in sampled.decided],
        )
    except production_tiles.NotSampleable as reason:
        event = run(unsampleable=str(reason))
    except production_tiles.KernelFault as fault:
        event = run(error=str(fault), fault=fault.reason)
    except Exception as failure:
        pltpu.reset_tpu_interpret_mode_state()
        text = first_lines(failure)
        # a fault the interpreter found in the kernel rejects it; any other stop may be this
        # harness's rewriting of a kernel it did not foresee, so it only leaves the production
        # shapes unverified (the verdict says so) and never rejects an honest kernel
        if any(sign in text for sign in _KERNEL_FAULTS):
            event = run(error=text)
        else:
            event = run(unsampleable=f"the sampled run stopped: {text}")
    _emit(dataclasses.replace(event, seconds=round(time.perf_counter() - start, 3)))


def _production_inputs(subject: Subject, files: list[str]) -> Any:
    """The production inputs the reference is computed on (raw .npy files in the cache, which
    this process may read and not write), as arrays of the inputs' shapes and types."""
    specs = jax.tree.leaves(subject.specs)
    if len(files) != len(specs):
        raise RuntimeError(f"{len(files)} production input files for {len(specs)} inputs")
    leaves = []
    for path, spec in zip(files, specs, strict=True):
        raw = np.load(path, mmap_mode="r", allow_pickle=False)
        # mapped, not copied: the sampled run reads only its blocks of a kernel's operands
        leaves.append(raw.view(spec.dtype).reshape(spec.shape))
    return jax.tree.unflatten(jax.tree.structure(subject.specs), leaves)


def _races_found() -> bool | None:
    """Whether TPU interpret mode saw a race; jax exposes this only in a private module."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call
    except ImportError:
        return None
    races = getattr(interpret_pallas_call, "races", None)
    return bool(getattr(races, "races_found", False)) if races is not None else None


def main() -> None:
    reply(READY)
    line = sys.stdin.readline()
    if not line.strip():
        return
    try:
        request = request_from_json(json.loads(line))
        use_task_cache(request.task_digest)  # before the kernel is read: our choice, not its
        if isinstance(request, TraceRequest):
            _emit(sandbox_check())  # written before the candidate is imported: ours
            for event in trace_candidate(request):
                _emit(event)
        else:
            evaluate_candidate(request)
    except Exception:  # a harness bug must still end the protocol cleanly
        _emit(WorkerProblem(traceback.format_exc(limit=3)[-1500:]))
    _emit(Done())


if __name__ == "__main__":
    main()
