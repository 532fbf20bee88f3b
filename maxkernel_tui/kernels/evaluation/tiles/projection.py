"""The largest share of the tolerance an output's error uses, projected from the checked elements
to the whole output. NumPy only.

A sample of output blocks decides some of an output's elements; whether the one element of
millions that is outside the tolerance is among them is luck. Each checked element's share of
its tolerance, |a - b| / (atol + rtol·|b|), is a draw from the output's error distribution, and
the largest of N draws is what the whole output would show: the upper tail of the shares is fit
with exponential excesses over a high threshold u (the peaks-over-threshold model:
P(share > u + x) = p_u·exp(-x/β), with β the excesses' mean), so the largest of N elements is
about u + β·ln(N·p_u), and the elements over the tolerance about N·p_u·exp(-(1 - u)/β). Where
every element was checked the largest is the one seen. Rounding errors of sums have Gaussian
tails, lighter than exponential ones: the projection errs on the side of rejecting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_EXCESSES = 20  # the fewest tail elements a fit rests on


@dataclass(frozen=True)
class Projection:
    """An output's largest share of the tolerance, projected over its `total` elements from the
    `checked` ones (exact where they are all of them), and about how many elements over it."""

    share: float
    over: int
    checked: int
    total: int

    @property
    def exact(self) -> bool:
        return self.checked >= self.total


def project(shares: np.ndarray, total: int) -> Projection:
    """The largest of `total` elements' shares, from the checked elements' `shares`."""
    checked = int(shares.size)
    if checked == 0:
        return Projection(0.0, 0, 0, total)
    ordered = np.sort(shares.astype(np.float64))
    largest = float(ordered[-1])
    if checked >= total:
        return Projection(largest, int((ordered > 1.0).sum()), checked, checked)
    # the top sqrt(n) elements (at least MIN_EXCESSES, at most all but one) make the tail
    excesses = min(checked - 1, max(MIN_EXCESSES, math.isqrt(checked)))
    if excesses < 1:
        return Projection(largest, int(largest > 1.0), checked, total)
    threshold = float(ordered[-excesses - 1])
    scale = float(np.mean(ordered[-excesses:] - threshold))
    tail = total * excesses / checked  # the elements of the whole output expected over u
    share = threshold + scale * math.log(tail) if scale > 0 else threshold
    over = tail * math.exp(-(1.0 - threshold) / scale) if scale > 0 else 0.0
    # never less than what was seen
    seen_over = int((ordered > 1.0).sum())
    return Projection(max(share, largest), max(round(over), seen_over), checked, total)
