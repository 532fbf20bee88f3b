"""Statistics for timings: medians with bootstrap confidence intervals, and whether a speedup
is significant. Pure Python; no jax, no NumPy."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

from maxkernel_tui.kernels.report.reasons import Ratio
from maxkernel_tui.kernels.report.words import ratio_words

CONFIDENCE = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Estimate:
    median: float
    low: float
    high: float  # the CONFIDENCE interval of the median


@dataclass(frozen=True)
class Speedup:
    ratio: float  # baseline median / candidate median: > 1 means the candidate is faster
    low: float
    high: float

    @property
    def significant_win(self) -> bool:
        return self.low > 1.0

    def describe(self) -> str:
        return ratio_words(self.figures)

    @property
    def figures(self) -> Ratio:
        return Ratio(self.ratio, self.low, self.high)


def median_estimate(samples: list[float], seed: int = 0) -> Estimate:
    rng = random.Random(seed)
    medians = sorted(
        statistics.median(rng.choices(samples, k=len(samples))) for _ in range(RESAMPLES)
    )
    return Estimate(statistics.median(samples), *_interval(medians))


def speedup(baseline: list[float], candidate: list[float], seed: int = 0) -> Speedup:
    """Bootstrap of the ratio of medians; a win counts only when the whole interval is above 1."""
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(baseline, k=len(baseline)))
        / statistics.median(rng.choices(candidate, k=len(candidate)))
        for _ in range(RESAMPLES)
    )
    return Speedup(statistics.median(baseline) / statistics.median(candidate), *_interval(ratios))


def _interval(sorted_values: list[float]) -> tuple[float, float]:
    tail = (1.0 - CONFIDENCE) / 2
    return (
        sorted_values[int(tail * len(sorted_values))],
        sorted_values[min(int((1.0 - tail) * len(sorted_values)), len(sorted_values) - 1)],
    )
