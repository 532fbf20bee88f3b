"""How the rounding error of bf16 matmul operands grows from the shapes it is seen at to
production's, and the most of a task's tolerance it may be projected to use. No jax here (the
emulation in matmul_rounding.py measures it; the built-in agent and the profile read it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The most of the task's tolerance bf16 operands may be projected to use at production shapes: a
# margin for the projection's spread (the worst element of a seed varies by about 10%).
PROJECTED_SHARE_LIMIT = 0.9


@dataclass(frozen=True)
class Depth:
    """Where a matmul's rounding error was seen and where the kernel will run: its contraction
    depth (K) and the outputs' element count, at a numerics configuration and at production."""

    observed_k: int
    production_k: int
    observed_elements: int
    production_elements: int

    def growth(self) -> float:
        """How much the worst rounding error of bf16 operands grows from the observed shapes to
        production. Each product's rounding error is independent and of either sign, so a dot's
        error grows like sqrt(K); the worst of N roughly normal errors grows like
        sqrt(ln N). Never below 1: smaller production shapes are not projected down."""
        depth = math.sqrt(max(self.production_k, 1) / max(self.observed_k, 1))
        spread = math.sqrt(
            math.log(max(self.production_elements, 3)) / math.log(max(self.observed_elements, 3))
        )
        return max(depth, 1.0) * max(spread, 1.0)


def projected_share(observed_share: float, depth: Depth) -> float:
    """The share of the tolerance (|Δ| / (atol + rtol·|reference|), compare.py) the worst element
    is projected to use at production, from the share seen at a numerics configuration. The
    tolerance is held at its observed size: where the reference grows with K too, its rtol part
    grows and this errs on the side of f32."""
    return observed_share * depth.growth()
