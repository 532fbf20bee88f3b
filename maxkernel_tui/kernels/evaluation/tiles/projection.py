"""The largest share of the tolerance an output's error uses, projected from the checked elements
to the whole output. NumPy only.

A sample of output blocks decides some of an output's elements; whether the one element of
millions that is outside the tolerance is among them is luck. Each checked element's share of
its tolerance, |a - b| / (atol + rtol·|b|), is a draw from the output's error distribution, and
the largest of N draws is what the whole output would show: the upper tail of the shares is fit
with exponential excesses over a high threshold u (the peaks-over-threshold model:
P(share > u + x) = p_u·exp(-x/β), with β the excesses' mean), so the largest of N elements is
about u + β·ln(N·p_u), and the elements over the tolerance about N·p_u·exp(-(1 - u)/β). Where
every element was checked the largest is the one seen.

Measured on this machine (`maxkernel-tui eval --json`): the built-in agent's 41k kernel with
bf16 operands (8 of 33.5M elements at 111% of the tolerance, as its agent test says) projected
to 117% from a sample that met none of them; the agent's accepted kernels well under 100%
(8p, a bf16 GEMM: 78%; 41k, 19k, 12p, 26k: under 0.1%). A handful of elements far beyond the
rest of the tail (a bf16 GEMM with 3 of 1M at 123% and the next at 93%) can escape it: the
sample's tail does not show them.
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


def project(shares: np.ndarray, total: int) -> Projection:
    """The largest of `total` elements' shares, from the checked elements' `shares`."""
    checked = int(shares.size)
    if checked == 0:
        return Projection(0.0, 0, 0, total)
    shares = shares.astype(np.float64).reshape(-1)
    largest = float(shares.max())
    seen_over = int((shares > 1.0).sum())
    if checked >= total:
        return Projection(largest, seen_over, checked, checked)
    # the top sqrt(n) elements (at least MIN_EXCESSES, at most all but one) make the tail
    excesses = min(checked - 1, max(MIN_EXCESSES, math.isqrt(checked)))
    if excesses < 1:
        return Projection(largest, seen_over, checked, total)
    top = np.partition(shares, checked - excesses - 1)[checked - excesses - 1 :]
    threshold = float(top.min())  # the largest but `excesses`: u
    scale = float((top.sum() - threshold * top.size) / excesses)  # their mean excess over u
    tail = total * excesses / checked  # the elements of the whole output expected over u
    share = threshold + scale * math.log(tail) if scale > 0 else threshold
    over = tail * math.exp(-(1.0 - threshold) / scale) if scale > 0 else 0.0
    # never less than what was seen
    return Projection(max(share, largest), max(round(over), seen_over), checked, total)
