"""Which of the measured paths are active on this machine: each needs a TPU under the tool, and
says what takes its place without one. No jax here (`doctor` and the UI read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.kernels.perf.calibration import default_calibration_file, load_calibration


@dataclass(frozen=True)
class MeasuredPath:
    name: str
    active: bool
    detail: str  # what runs, or what runs instead


CALIBRATION = "calibration"
# (name, with a TPU, without one)
_PATHS = (
    (
        "device timing",
        "the timing check reads each run's device time from a profiler trace",
        "no timings (interpret mode on a CPU is a simulator)",
    ),
    (
        "measured autotune",
        "the model's best few settings are timed on the device; the measured best is proposed",
        "the model's estimate chooses",
    ),
    (
        CALIBRATION,
        "every measured timing is recorded beside the model's estimate",
        "nothing recorded; estimates scaled by the records already in the file",
    ),
    (
        "device numerics",
        "the candidate is checked against the reference on the device at production shapes",
        "numerics in TPU interpret mode on check shapes only",
    ),
    (
        "DMA share",
        "the profile shows the DMA-wait and compute shares of the device trace (measured)",
        "no device trace: the model's memory/compute bound only (estimated)",
    ),
)


def measured_paths(tpu: bool, calibration_file: Path | None = None) -> list[MeasuredPath]:
    """Each path, active or not; the calibration line counts the file's records."""
    records = len(load_calibration(calibration_file or default_calibration_file()).records)
    found = []
    for name, with_tpu, without in _PATHS:
        detail = with_tpu if tpu else without
        if name == CALIBRATION:
            detail += f"; {records} record(s) in the calibration file"
        found.append(MeasuredPath(name, tpu, detail))
    return found
