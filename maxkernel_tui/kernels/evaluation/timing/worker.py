"""Times a candidate against the XLA reference on a real TPU, in a fresh process. Imports jax.

    python -m maxkernel_tui.kernels.evaluation.timing.worker

One request (a `TimingRequest`), one answer (a `TimingAnswer`): per-call times of the compiled
candidate and reference, interleaved, on inputs rotated between fresh seeds so no call can reuse
the previous one's result; device time from a profiler trace on a TPU, else wall time around
`block_until_ready` (device_clock.py says which). On a TPU it also checks the candidate against
the reference on the device at these shapes and sends the model's estimate for calibration.
It never imports the candidate, whose module could replace the clock: it times the program the
candidate's tracer carried (evaluation/tracer/transport.py), the one the judge checked.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
from jax.experimental.pallas import tpu as pltpu
from jax.extend.core import jaxpr_as_fun

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation import gradients
from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingRequest, TimingSamples
from maxkernel_tui.kernels.evaluation.timing.clock import (
    choose_clock,
    named_jit,
    time_interleaved,
)
from maxkernel_tui.kernels.evaluation.timing.device_checks import device_numerics, model_point
from maxkernel_tui.kernels.evaluation.tracer.transport import interpreted, load_program
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.perf.calibration import ModelPoint
from maxkernel_tui.kernels.perf.model import minimal_io_bytes
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY

INPUT_SETS = 2  # rotated; production inputs can take GBs of HBM each


def measure(request: TimingRequest) -> TimingAnswer:
    task = load_task(request.task)
    reference = runtime.load_reference(task)
    pairs = [
        runtime.make_inputs(task, reference, request.config, seed) for seed in range(INPUT_SETS)
    ]
    inputs = [dynamic for dynamic, _ in pairs]
    static = pairs[0][1]
    device = jax.devices()[0]
    on_tpu = device.platform == "tpu"
    # the candidate's program as its tracer carried it: this process never imports the kernel
    program = load_program(Path(request.program).read_bytes())
    carried = jaxpr_as_fun(program if on_tpu else interpreted(program, pltpu.InterpretParams()))
    computation: Callable[..., Any] = functools.partial(_with_static, reference.computation, static)
    if request.gradients:  # forward and backward: the programs take the cotangents too
        task = task.with_gradients(tuple(request.gradients))
        _, _, expected = runtime.io_specs(task, reference, request.config)
        at = gradients.positions(task, len(inputs[0]))
        inputs = [(*d, *gradients.cotangents(expected, seed)) for seed, d in enumerate(inputs)]
        computation = _xla_backward(reference.computation, static, at, len(pairs[0][0]))

    def candidate(*dynamic: Any) -> Any:
        return carried(*jax.tree.leaves(dynamic))

    # On anything but a TPU this is only a plumbing check: interpret mode, and the caller is told.
    interpret = pltpu.force_tpu_interpret_mode() if not on_tpu else contextlib.nullcontext()
    with interpret:
        # Both take the arrays only; the static args are compile-time constants of each program.
        programs = {
            "candidate": named_jit("candidate", candidate),
            "reference": named_jit("reference", computation),
        }
        # an expert's forward is no measure of a forward and backward
        if request.expert is not None and not request.gradients:
            expert = runtime.load_candidate(task, reference, Path(request.expert))
            programs["expert"] = named_jit("expert", lambda *d: expert.computation(*d, *static))
        numerics = None
        if on_tpu:  # production shapes on the device, after every CPU check passed
            tolerance = (task.gradient_tolerance if request.gradients else task.tolerance)(
                request.config
            )
            numerics = device_numerics(
                programs["candidate"], programs["reference"], inputs[0], tolerance, request.config
            )
        timed = time_interleaved(
            programs, inputs, request.repeats, request.warmups, choose_clock(device.platform)
        )
    return TimingAnswer(
        device.device_kind,
        device.platform,
        TimingSamples(**timed.samples),
        timed.clock,
        timed.note,
        numerics,
        _model_point(task, reference, candidate, request.config, device.device_kind)
        if on_tpu and not request.gradients
        else None,
        list(request.gradients),
    )


def _with_static(computation: Callable[..., Any], static: tuple[Any, ...], *dynamic: Any) -> Any:
    return computation(*dynamic, *static)


def _xla_backward(
    computation: Callable[..., Any], static: tuple[Any, ...], at: tuple[int, ...], count: int
) -> Callable[..., Any]:
    """XLA's gradient of the reference as a function of the dynamic inputs then the cotangents
    (as the candidate's backward program takes them): jax.vjp of the reference, which runs its
    forward too, fused by XLA."""
    program = gradients.backward(computation, static, at)

    def run(*flat: Any) -> Any:
        return program(tuple(flat[:count]), list(flat[count:]))

    return run


def _model_point(
    task: Any, reference: Any, candidate: Callable[..., Any], config: str, device_kind: str
) -> ModelPoint | None:
    specs, _, outputs = runtime.io_specs(task, reference, config)
    return model_point(
        candidate,
        specs,
        device_kind,
        minimal_io_bytes(specs, outputs),
    )


def main() -> None:
    reply(READY)
    line = sys.stdin.readline()
    if line.strip():
        answer = measure(TimingRequest.from_json(json.loads(line)))
        reply(answer.to_json())


if __name__ == "__main__":
    main()
