"""The process a candidate kernel runs in: one candidate, then it exits. Imports jax.

    python -m maxkernel_tui.kernels.evaluation.candidate_worker

Started ahead of time by the harness's pool; prints `{"ready": true}` once jax is imported,
then reads ONE request line (a `CandidateRequest`) and answers with event lines
(evaluation/protocol.py): a `check` per finished check, a `run` per numerics run (outputs saved
as .npy in the request's directory), then `done`.
The comparison with the reference happens in the caller, not here, so nothing the candidate
does in this process can reach the reference's outputs.
"""

from __future__ import annotations

import json
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import jax
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.jaxpr_work import Work, measure
from maxkernel_tui.kernels.evaluation.outputs import save_outputs
from maxkernel_tui.kernels.evaluation.protocol import (
    CandidateEvent,
    CandidateRequest,
    Done,
    NumericsRun,
    WorkerProblem,
    event_to_json,
)
from maxkernel_tui.kernels.evaluation.report import FAIL, PASS, Check, CheckStatus
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.kernels.workers import READY

# Heavy work left to XLA outside the Pallas kernels, as a share of the reference's own.
XLA_FLOPS_SHARE = 0.05
XLA_REDUCED_SHARE = 0.10
XLA_FLOPS_FLOOR = 1e7  # tiny matmuls (index arithmetic, small projections) do not count
XLA_REDUCED_FLOOR = 1e6


def _emit(event: CandidateEvent) -> None:
    print(json.dumps(event_to_json(event)), flush=True)


def _check(name: str, status: CheckStatus, detail: str, start: float, **data: Any) -> bool:
    _emit(Check(name, status, detail, round(time.perf_counter() - start, 3), data))
    return status == PASS


def _first_lines(error: BaseException, limit: int = 700) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    if isinstance(error, MemoryError):
        limit_bytes = resource.getrlimit(resource.RLIMIT_AS)[0]
        cap = (
            f"{limit_bytes / 2**30:.0f} GiB"
            if limit_bytes != resource.RLIM_INFINITY
            else "the machine's"
        )
        text = f"out of memory (process limit {cap}): {text}"
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("  File ")]
    return " | ".join(lines)[:limit]


def load_candidate(path: Path) -> Any:
    return runtime.module_from_source(path, "candidate_kernel")


def evaluate_candidate(request: CandidateRequest) -> None:
    """Trace, TPU lowering, TPU compile, then the candidate's outputs for each numerics run."""
    start = time.perf_counter()
    try:
        target = aot.target_for(request.target)
    except KeyError as error:
        _emit(WorkerProblem(str(error.args[0]), usage=True))
        return
    task = load_task(request.task)
    reference = runtime.load_reference(task)
    task = runtime.with_extra_configs(task, reference, request.extra_configs)
    try:
        candidate = load_candidate(Path(request.kernel))
    except Exception as error:
        _check("trace", FAIL, f"the kernel fails to import: {_first_lines(error)}", start)
        return
    specs, static, expected = runtime.io_specs(task, reference, request.bench_config)

    def candidate_fn(*dynamic: Any) -> Any:
        return candidate.computation(*dynamic, *static)

    if not _trace_check(
        task,
        reference,
        candidate,
        candidate_fn,
        specs,
        static,
        expected,
        start,
        require_pallas=request.require_pallas,
    ):
        return
    start = time.perf_counter()
    try:
        jax.jit(candidate_fn, keep_unused=True).trace(*specs).lower(lowering_platforms=("tpu",))
    except Exception as error:
        _check(
            "tpu_lower",
            FAIL,
            f"cannot be lowered for TPU at production shapes: {_first_lines(error)}",
            start,
        )
        return
    _check("tpu_lower", PASS, "lowered for TPU (Mosaic) at production shapes", start)

    start = time.perf_counter()
    try:
        aot.compile_for_tpu(candidate_fn, specs, target)
    except Exception as error:
        _check(
            "tpu_compile", FAIL, f"TPU {target.name} compile failed: {_first_lines(error)}", start
        )
        return
    _check(
        "tpu_compile",
        PASS,
        f"compiled ahead of time for TPU {target.name} with libtpu",
        start,
        target=target.name,
    )
    _numerics_runs(task, reference, candidate, request)


def _trace_check(
    task: Any,
    reference: Any,
    candidate: Any,
    candidate_fn: Any,
    specs: Any,
    static: Any,
    expected: list,
    start: float,
    require_pallas: bool,
) -> bool:
    try:
        runtime.check_signature(task, candidate.computation, len(specs), static)
        traced = jax.make_jaxpr(candidate_fn)(*specs)
    except TaskError as error:
        return _check(
            "trace",
            FAIL,
            error.problem.replace("computation", "the kernel's computation", 1),
            start,
        )
    except Exception as error:
        return _check(
            "trace", FAIL, f"fails to trace at production shapes: {_first_lines(error)}", start
        )
    got = traced.out_avals
    if [(tuple(e.shape), str(e.dtype)) for e in expected] != [
        (tuple(g.shape), str(g.dtype)) for g in got
    ]:
        return _check(
            "trace",
            FAIL,
            f"outputs differ from the reference's: {_avals(got)} instead of {_avals(expected)}",
            start,
        )
    if not require_pallas:
        return _check(
            "trace", PASS, f"sanity run (no Pallas required): outputs {_avals(got)}", start
        )
    work = measure(traced)
    reference_work = measure(jax.make_jaxpr(lambda *d: reference.computation(*d, *static))(*specs))
    if not work.has_pallas:
        return _check(
            "trace",
            FAIL,
            "no pallas_call: the work runs in plain XLA (jnp), not in a Pallas kernel",
            start,
        )
    outside = _outside_problem(work, reference_work)
    if outside:
        return _check("trace", FAIL, outside, start, heavy_ops=work.heavy_ops[:5])
    return _check(
        "trace",
        PASS,
        f"{len(work.pallas_calls)} pallas_call(s); heavy work inside Pallas "
        f"(outside: {work.xla_flops:.3g} flops, {work.xla_reduced:.3g} reduced elements); "
        f"outputs {_avals(got)}",
        start,
    )


def _outside_problem(work: Work, reference: Work) -> str | None:
    flops_budget = max(XLA_FLOPS_SHARE * reference.xla_flops, XLA_FLOPS_FLOOR)
    reduced_budget = max(XLA_REDUCED_SHARE * reference.xla_reduced, XLA_REDUCED_FLOOR)
    if work.xla_flops > flops_budget or work.xla_reduced > reduced_budget:
        ops = "; ".join(work.heavy_ops[:3])
        return (
            f"heavy work runs in XLA outside the Pallas kernel(s): {work.xla_flops:.3g} flops and "
            f"{work.xla_reduced:.3g} reduced elements outside, against the reference's "
            f"{reference.xla_flops:.3g} flops and {reference.xla_reduced:.3g} (e.g. {ops})"
        )
    return None


def _avals(avals: Any) -> str:
    return ", ".join(f"{a.dtype}{list(a.shape)}" for a in avals)


def _numerics_runs(task: Any, reference: Any, candidate: Any, request: CandidateRequest) -> None:
    params = pltpu.InterpretParams(
        uninitialized_memory="nan",
        out_of_bounds_reads="raise",
        detect_races=request.detect_races,
    )
    for config, seed in request.runs:
        start = time.perf_counter()
        files: list[str] | None = None
        races: bool | None = None
        error: str | None = None
        try:
            dynamic, static = runtime.make_inputs(task, reference, config, seed)
            program = jax.jit(lambda *d, static=static: candidate.computation(*d, *static))
            with pltpu.force_tpu_interpret_mode(params):
                output = jax.block_until_ready(program(*dynamic))
            files = save_outputs(Path(request.out_dir), f"candidate-{config}-{seed}", output)
            races = _races_found() if request.detect_races else None
        except Exception as failure:
            error = _first_lines(failure)
            pltpu.reset_tpu_interpret_mode_state()  # the interpreter keeps state after an error
        seconds = round(time.perf_counter() - start, 3)
        _emit(NumericsRun(config, seed, files, error, races, seconds))


def _races_found() -> bool | None:
    """Whether TPU interpret mode saw a race; jax exposes this only in a private module."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call
    except ImportError:
        return None
    races = getattr(interpret_pallas_call, "races", None)
    return bool(getattr(races, "races_found", False)) if races is not None else None


def main() -> None:
    print(json.dumps(READY), flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return
    try:
        evaluate_candidate(CandidateRequest.from_json(json.loads(line)))
    except Exception:  # a harness bug must still end the protocol cleanly
        _emit(WorkerProblem(traceback.format_exc(limit=3)[-1500:]))
    _emit(Done())


if __name__ == "__main__":
    main()
