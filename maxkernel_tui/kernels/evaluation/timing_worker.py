"""Times a candidate against the XLA reference on a real TPU, in a fresh process. Imports jax.

    python -m maxkernel_tui.kernels.evaluation.timing_worker

One request (a `TimingRequest`), one answer (a `TimingAnswer`): per-call wall
times around `block_until_ready` of the compiled candidate and reference, interleaved, on
inputs rotated between fresh seeds so no call can reuse the previous one's result. Only runs
after the candidate passed every other check (static rules forbid touching clocks).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import jax
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingRequest, TimingSamples
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.workers import READY

INPUT_SETS = 2  # rotated; production inputs can take GBs of HBM each


def measure(request: TimingRequest) -> TimingAnswer:
    task = load_task(request.task)
    reference = runtime.load_reference(task)
    candidate = runtime.load_candidate(task, reference, Path(request.kernel))
    pairs = [
        runtime.make_inputs(task, reference, request.config, seed) for seed in range(INPUT_SETS)
    ]
    inputs = [dynamic for dynamic, _ in pairs]
    static = pairs[0][1]
    device = jax.devices()[0]
    # On anything but a TPU this is only a plumbing check: interpret mode, and the caller is told.
    interpret = (
        pltpu.force_tpu_interpret_mode() if device.platform != "tpu" else contextlib.nullcontext()
    )
    with interpret:
        # Both take the arrays only; the static args are compile-time constants of each program.
        programs = {
            "candidate": jax.jit(lambda *d: candidate.computation(*d, *static)),
            "reference": jax.jit(lambda *d: reference.computation(*d, *static)),
        }
        samples: dict[str, list[float]] = {name: [] for name in programs}
        for program in programs.values():
            for i in range(request.warmups):
                jax.block_until_ready(program(*inputs[i % INPUT_SETS]))
        for repeat in range(request.repeats):
            for name, program in programs.items():
                start = time.perf_counter()
                jax.block_until_ready(program(*inputs[repeat % INPUT_SETS]))
                samples[name].append(time.perf_counter() - start)
    return TimingAnswer(device.device_kind, device.platform, TimingSamples(**samples))


def main() -> None:
    print(json.dumps(READY), flush=True)
    line = sys.stdin.readline()
    if line.strip():
        answer = measure(TimingRequest.from_json(json.loads(line)))
        print(json.dumps(answer.to_json()), flush=True)


if __name__ == "__main__":
    main()
