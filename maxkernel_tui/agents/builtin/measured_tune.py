"""Measured autotuning: the model orders and prunes the candidate settings, a `Timer` times the
few that are left on the device, and the measured best is proposed. No jax here (the timer
brings its own: on a TPU VM the timing worker, kernels/evaluation/device_timer.py).

The statistics are the timing check's: each candidate's samples against the model's own pick,
as a ratio of medians with a bootstrap 95% interval. The model's pick stays unless another
setting is significantly faster (its whole interval above 1); noise never moves the choice.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.kernels.evaluation.device_timer import DeviceTimer
from maxkernel_tui.kernels.evaluation.stats import Speedup, speedup
from maxkernel_tui.kernels.evaluation.timing import tpu_present
from maxkernel_tui.kernels.task import Task

MEASURED_CANDIDATES = 4  # the model's best few are timed; each costs a compile and ~20 runs


class Timer(Protocol):
    """Times a kernel source's `computation` at the task's production shapes."""

    clock: str  # how and where it measures, in words ("device trace on TPU v5 lite (tpu)")

    def time(self, source: str) -> list[float]:
        """Seconds per call, one sample per run."""
        ...


@dataclass(frozen=True)
class MeasuredTrial:
    tunables: Tunables
    estimated_s: float
    samples: tuple[float, ...] = ()
    error: str | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


@dataclass(frozen=True)
class Measurement:
    """What the timer found: the chosen setting (None when none could be timed), every timed
    trial, and the chosen one's gain over the model's pick (None when the model's pick stayed)."""

    best: Tunables | None
    trials: list[MeasuredTrial]
    clock: str
    gain: Speedup | None = None

    def lines(self) -> list[str]:
        """Each figure with its kind: the model's estimate and the measured median."""
        lines = []
        for trial in self.trials:
            measured = (
                f"measured {trial.median_s * 1e3:.3f} ms ({self.clock})"
                if trial.median_s is not None
                else f"not measured: {trial.error}"
            )
            lines.append(
                f"{_words(trial.tunables)}: estimated {trial.estimated_s * 1e3:.3f} ms, {measured}"
            )
        if self.best is None:
            verdict = "chosen: the model's pick (estimated): no setting could be timed"
        elif self.gain is not None:
            verdict = (
                f"chosen: {_words(self.best)}, {self.gain.describe()} over the model's pick "
                "(measured)"
            )
        else:
            verdict = (
                f"chosen: {_words(self.best)}, the model's pick (measured: no setting "
                "significantly faster)"
            )
        return [*lines, verdict]


def device_timer(task: Task) -> Timer | None:
    """The TPU's timer when this machine has one; None keeps the estimate-only path."""
    return DeviceTimer(task) if tpu_present() else None


def measure_best(
    ranked: Sequence[tuple[Tunables, float]],
    render: Callable[[Tunables], str],
    timer: Timer,
    keep: int = MEASURED_CANDIDATES,
) -> Measurement:
    """`ranked`: (tunables, estimated seconds) that fit, the model's best first. The best is
    None when no candidate could be timed (the caller keeps the model's pick)."""
    trials = [_timed(tunables, seconds, render, timer) for tunables, seconds in ranked[:keep]]
    timed = [t for t in trials if t.samples]
    if not timed:
        return Measurement(None, trials, timer.clock)
    pick = timed[0]  # the model's best that ran
    gains = [(speedup(list(pick.samples), list(t.samples)), t) for t in timed[1:]]
    wins = [(gain, t) for gain, t in gains if gain.significant_win]
    if not wins:
        return Measurement(pick.tunables, trials, timer.clock, None)
    gain, best = max(wins, key=lambda win: win[0].ratio)
    return Measurement(best.tunables, trials, timer.clock, gain)


def _timed(
    tunables: Tunables, seconds: float, render: Callable[[Tunables], str], timer: Timer
) -> MeasuredTrial:
    try:
        return MeasuredTrial(tunables, seconds, tuple(timer.time(render(tunables))))
    except Exception as error:  # a candidate that fails on the device is just not chosen
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return MeasuredTrial(tunables, seconds, error=first[:200])


def _words(tunables: Tunables) -> str:
    return ", ".join(f"{name} {value}" for name, value in sorted(vars(tunables).items()))
