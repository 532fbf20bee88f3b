"""The timing check: only on a real TPU. No jax here.

On a machine without a TPU the check is skipped and says why: TPU interpret mode on a CPU is
a simulator, so its times say nothing about the kernel on a TPU.
"""

from __future__ import annotations

import glob
import os

from maxkernel_tui.kernels.evaluation.report import SKIP, Check


def tpu_present() -> bool:
    """A TPU VM exposes its chips as /dev/accel* (v4, v5e, v5p, v6e) or /dev/vfio/* devices."""
    if os.environ.get("MAXKERNEL_TUI_NO_TPU"):
        return False
    return bool(glob.glob("/dev/accel*")) or bool(glob.glob("/dev/vfio/[0-9]*"))


def timing_check() -> Check:
    if not tpu_present():
        return Check("timing", SKIP, "not measured: no TPU on this machine; times in TPU interpret mode on a "
                     "CPU are a simulator's, not the kernel's, so none are shown")
    return Check("timing", SKIP, "not measured: a TPU is present, but on-device timing is not built yet "
                 "(no figure is shown rather than a wrong one)")
