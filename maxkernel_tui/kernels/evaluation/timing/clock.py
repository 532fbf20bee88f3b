"""Timing compiled programs interleaved, on rotating inputs, with the clock the device allows.
Imports jax (the timing worker and the measured autotuner's timer run it).

`choose_clock` is the one place that decides: on a TPU each call's device time comes from a
`jax.profiler` trace of the runs (perf/device_trace.py); elsewhere, or when the trace does not
hold one run per call, the wall clock around `block_until_ready` (dispatch included), and the
answer says which with the reason.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from maxkernel_tui.kernels.evaluation.protocol import DEVICE_TRACE, WALL_CLOCK
from maxkernel_tui.kernels.perf.device_trace import device_run_seconds, module_name, newest_trace
from maxkernel_tui.kernels.report.basis import Clock

Program = Callable[..., Any]


@dataclass(frozen=True)
class Timed:
    samples: dict[str, list[float]]  # seconds per call, per program name
    clock: Clock
    note: str  # why the wall clock, when it was a fallback; "" otherwise


def choose_clock(platform: str) -> Clock:
    """Device time from the profiler on a TPU; the wall clock anywhere else."""
    return DEVICE_TRACE if platform == "tpu" else WALL_CLOCK


def named_jit(name: str, function: Program) -> Program:
    """`jax.jit` of `function` under a module name of its own (`jit_mkt_<name>`), so the trace
    tells the programs apart."""

    def program(*args: Any) -> Any:
        return function(*args)

    program.__name__ = program.__qualname__ = f"mkt_{name}"
    return jax.jit(program)


def time_interleaved(
    programs: Mapping[str, Program],
    inputs: Sequence[Sequence[Any]],
    repeats: int,
    warmups: int,
    clock: Clock,
) -> Timed:
    """Each program `repeats` times, one call of each in turn, call `i` on `inputs[i % n]`.
    Programs must come from `named_jit` for the device clock to find them."""
    for program in programs.values():
        for i in range(warmups):
            jax.block_until_ready(program(*inputs[i % len(inputs)]))
    if clock == WALL_CLOCK:
        return Timed(_wall_clock_runs(programs, inputs, repeats), WALL_CLOCK, "")
    with tempfile.TemporaryDirectory(prefix="mkt-timing-trace-") as trace_dir:
        with jax.profiler.trace(trace_dir):
            wall = _wall_clock_runs(programs, inputs, repeats)
        xplane = newest_trace(Path(trace_dir))
        if xplane is None:
            return Timed(wall, WALL_CLOCK, "the profiler wrote no trace")
        modules = {name: module_name(f"mkt_{name}") for name in programs}
        found = device_run_seconds(xplane, list(modules.values()))
    device = {name: found[module] for name, module in modules.items()}
    short = [name for name, runs in device.items() if len(runs) != repeats]
    if short:
        counts = ", ".join(f"{name} {len(device[name])}" for name in short)
        note = f"the trace held the wrong number of runs ({counts} of {repeats})"
        return Timed(wall, WALL_CLOCK, note)
    return Timed(device, DEVICE_TRACE, "")


def _wall_clock_runs(
    programs: Mapping[str, Program], inputs: Sequence[Sequence[Any]], repeats: int
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in programs}
    for repeat in range(repeats):
        for name, program in programs.items():
            start = time.perf_counter()
            jax.block_until_ready(program(*inputs[repeat % len(inputs)]))
            samples[name].append(time.perf_counter() - start)
    return samples
