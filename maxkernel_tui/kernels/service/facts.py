"""What the evaluation knows of this machine, for `doctor`: whether a TPU is here to time on,
and which timing paths have been measured on one. No jax."""

from __future__ import annotations

from maxkernel_tui.kernels.evaluation.timing.check import tpu_present
from maxkernel_tui.kernels.evaluation.timing.measured_paths import measured_paths

__all__ = ["measured_paths", "tpu_present"]
