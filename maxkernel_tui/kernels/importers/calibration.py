"""A 16-bit task's default tolerance, checked against the reference's own rounding. No jax
here; the measuring runs in kernels/rounding_worker.py.

A bf16 reference rounds its intermediates; where an exponential or a division follows a
rounded value, one unit in the last place of that value moves the output by far more than one
of its own. Another valid evaluation order of the same function (a TPU's matmul sums in
another order than the CPU's XLA) then disagrees with the reference by that much, so no
kernel, not even the reference run elsewhere, could be held to a tolerance below it. Measured
on an imported SwiGLU with N(0, 1) inputs (bf16 512x1024x2048): the reference with its matmuls
summed in two halves differs from itself by up to 157% of the 16-bit default 0.01.

So `tasks import` measures how far the reference in its dtypes lands from the same function in
f32 and takes the smallest tolerance of the ladder that this spread uses at most half of (a
candidate may round the other way: twice the spread). The task's notes say what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from maxkernel_tui.codec import JsonData, Shape
from maxkernel_tui.kernels.sandbox.policy import XlaCache
from maxkernel_tui.kernels.workers import (
    LineWorker,
    WorkerFailure,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

TOLERANCE_LADDER = (1e-2, 2e-2, 5e-2, 1e-1)  # atol = rtol, the 16-bit default first
SEEDS = (0, 1)
HEADROOM = 0.5  # the largest share of a tolerance the reference's own rounding may use
MEASURE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RoundingSpread(JsonData, shape=Shape(pairs=("used",))):
    """What rounding_worker measured: tolerance -> the largest share of it used by the
    reference in its dtypes against the same function in f32; or why nothing was measured."""

    used: dict[float, float] = field(default_factory=dict)
    configs: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Calibrated:
    tolerance: float  # atol = rtol
    note: str


def calibrated(spread: RoundingSpread, default: float) -> Calibrated:
    """The smallest tolerance of the ladder, at least `default`, whose share the reference's
    rounding keeps under HEADROOM (the last one when none does); the note says why."""
    if spread.error is not None:
        return Calibrated(
            default,
            f"tolerance atol {default:g}, rtol {default:g}: the default for 16-bit float inputs "
            f"(the reference's own rounding was not measured: {spread.error})",
        )
    ladder = [t for t in TOLERANCE_LADDER if t >= default and t in spread.used]
    chosen = next((t for t in ladder if spread.used[t] <= HEADROOM), ladder[-1])
    at_default = spread.used.get(default, 0.0)
    where = f"at {', '.join(spread.configs)} (seeds {', '.join(map(str, SEEDS))}; measured)"
    if chosen == default:
        return Calibrated(
            default,
            f"tolerance atol {default:g}, rtol {default:g}: the default for 16-bit float inputs; "
            f"the reference in its dtypes stays within {at_default:.0%} of it against the same "
            f"function in f32 {where}",
        )
    short = "" if spread.used[chosen] <= HEADROOM else ", the largest tried, and still short"
    return Calibrated(
        chosen,
        f"tolerance atol {chosen:g}, rtol {chosen:g}{short}: the 16-bit default {default:g} is "
        f"below the reference's own rounding, which puts its outputs in its dtypes up to "
        f"{at_default:.0%} of {default:g} away from the same function in f32 {where}; another "
        "valid evaluation order (a TPU's) differs from it as much",
    )


def measure(folder: Path) -> RoundingSpread:
    """The reference's rounding spread, measured in a jax worker, sandboxed as the describe
    worker that validates the folder (the reference is code from elsewhere)."""
    worker = LineWorker(
        python_module_argv("maxkernel_tui.kernels.rounding_worker"),
        jax_worker_env(),
        # the folder is still being written: nothing worth keeping in the compilation cache
        sandbox=sandbox_policy(readable=(folder,), xla_cache=XlaCache.OFF),
    )
    try:
        answer = worker.ask(str(folder), MEASURE_TIMEOUT_S)
    except WorkerFailure as failure:
        return RoundingSpread(error=f"the measuring worker failed: {failure}")
    finally:
        worker.close()
    return RoundingSpread.from_json(answer)
