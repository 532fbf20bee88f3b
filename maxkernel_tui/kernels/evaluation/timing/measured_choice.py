"""Measured autotuning's choice: the model orders and prunes the candidate settings, a `Timer`
times the few that are left on the device, and the measured best is proposed. No jax here (the
timer brings its own: on a TPU VM the timing worker, device_timer.py). Used by the built-in
agent's autotune and by the session's autotuner step alike; a setting is a name -> value map.

The statistics are the timing check's: each candidate's samples against the model's own pick,
as a ratio of medians with a bootstrap 95% interval. The model's pick stays unless another
setting is significantly faster (its whole interval above 1); noise never moves the choice.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from maxkernel_tui.kernels.evaluation.timing.check import tpu_present
from maxkernel_tui.kernels.evaluation.timing.device_timer import DeviceTimer
from maxkernel_tui.kernels.evaluation.timing.stats import Speedup, speedup
from maxkernel_tui.kernels.task import Task

Setting = Mapping[str, int]  # tunable name -> value
MEASURED_CANDIDATES = 4  # the model's best few are timed; each costs a compile and ~20 runs


class Timer(Protocol):
    """Times a kernel source's `computation` at the task's production shapes."""

    clock: str  # how and where it measures, in words ("device trace on TPU v5 lite (tpu)")

    def time(self, source: str) -> list[float]:
        """Seconds per call, one sample per run."""
        ...


@dataclass(frozen=True)
class MeasuredTrial:
    setting: Setting
    estimate: str  # the model's figure for it, in words, with its kind
    samples: tuple[float, ...] = ()
    error: str | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


@dataclass(frozen=True)
class Measurement:
    """What the timer found: the chosen setting (None when none could be timed), every timed
    trial, and the chosen one's gain over the model's pick (None when the model's pick stayed)."""

    best: Setting | None
    trials: list[MeasuredTrial]
    clock: str
    gain: Speedup | None = None
    baseline: str = "the model's pick"  # what the first trial is

    def lines(self) -> list[str]:
        """Each figure with its kind: the model's estimate and the measured median."""
        lines = []
        for trial in self.trials:
            measured = (
                f"measured {trial.median_s * 1e3:.3f} ms ({self.clock})"
                if trial.median_s is not None
                else f"not measured: {trial.error}"
            )
            lines.append(f"{_words(trial.setting)}: {trial.estimate}, {measured}")
        if self.best is None:
            verdict = f"chosen: {self.baseline} (estimated): no setting could be timed"
        elif self.gain is not None:
            verdict = (
                f"chosen: {_words(self.best)}, {self.gain.describe()} over {self.baseline} "
                "(measured)"
            )
        else:
            verdict = (
                f"chosen: {_words(self.best)}, {self.baseline} (measured: no setting "
                "significantly faster)"
            )
        return [*lines, verdict]


def device_timer(task: Task) -> Timer | None:
    """The TPU's timer when this machine has one; None keeps the estimate-only path."""
    return DeviceTimer(task) if tpu_present() else None


def measure_best(
    ranked: Sequence[tuple[Setting, str]],
    render: Callable[[Setting], str],
    timer: Timer,
    keep: int = MEASURED_CANDIDATES,
    baseline: str = "the model's pick",
) -> Measurement:
    """`ranked`: (setting, the model's estimate in words) that fit, the model's best first, or
    the current kernel first (`baseline` names it). The best is None when no candidate could be
    timed (the caller keeps what the model chose)."""
    trials = [_timed(setting, estimate, render, timer) for setting, estimate in ranked[:keep]]
    timed = [t for t in trials if t.samples]
    if not timed:
        return Measurement(None, trials, timer.clock, None, baseline)
    pick = timed[0]  # the model's best that ran
    gains = [(speedup(list(pick.samples), list(t.samples)), t) for t in timed[1:]]
    wins = [(gain, t) for gain, t in gains if gain.significant_win]
    if not wins:
        return Measurement(pick.setting, trials, timer.clock, None, baseline)
    gain, best = max(wins, key=lambda win: win[0].ratio)
    return Measurement(best.setting, trials, timer.clock, gain, baseline)


def _timed(
    setting: Setting, estimate: str, render: Callable[[Setting], str], timer: Timer
) -> MeasuredTrial:
    try:
        return MeasuredTrial(setting, estimate, tuple(timer.time(render(setting))))
    except Exception as error:  # a candidate that fails on the device is just not chosen
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return MeasuredTrial(setting, estimate, error=first[:200])


def _words(setting: Setting) -> str:
    return ", ".join(f"{name} {value}" for name, value in sorted(setting.items()))
