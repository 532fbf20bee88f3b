"""How a time figure was got: timed on a device (and by which clock), or estimated by the
performance model. The members' values are what reports, profiles, worker lines and the
calibration file hold."""

from __future__ import annotations

from enum import StrEnum


class Basis(StrEnum):
    MEASURED = "measured"  # timed on a real device
    ESTIMATED = "estimated"  # the performance model's (perf/model.py)
    CALIBRATED = "estimated, calibrated"  # the model's, scaled by TPU runs (perf/calibration.py)


class Clock(StrEnum):
    """What measured a timing's samples."""

    DEVICE_TRACE = "device trace"
    WALL_CLOCK = "wall clock"  # where the device trace is not to be had


# What the timing that decides a win is (a Timing's `what`)
SPEEDUP = "speedup over the XLA reference"
