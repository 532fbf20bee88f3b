"""How a sampled production run can end without values: the program cannot be run by tiles
(the verdict then says `checked at small shapes only` and why), or the kernel did something
that is wrong at production shapes whatever its values (rejected, with its reason). No jax.
"""

from __future__ import annotations

from maxkernel_tui.kernels.report.reasons import Reason


class NotSampleable(Exception):
    """The program cannot be run by sampled tiles; the message says why."""


class KernelFault(Exception):
    """The kernel is wrong at production shapes for a reason other than its values (it carries
    state from one output block to the next, it revisits an output block): `reason` is the code
    the tiles check is rejected with, the message says where."""

    def __init__(self, reason: Reason, text: str) -> None:
        super().__init__(text)
        self.reason = reason
