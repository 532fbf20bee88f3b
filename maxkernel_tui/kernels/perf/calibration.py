"""The calibration file: one record per measured timing of a kernel on a TPU, beside the model's
estimate for it, and what the model makes of them (a factor per TPU generation). No jax here.

The file is JSON lines, appended to (a crash loses at most the line being written; a line that
does not parse is skipped and counted). Each record keeps the kernel's features (bound, grid
steps, HBM bytes, flops, VMEM), the estimate, the measured median, the clock that measured it,
the TPU generation and device kind, and the jax and libtpu versions, so a later model can fit
more than one factor. Today's model scales its estimate for a generation by the median of
measured / estimated over that generation's records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from maxkernel_tui.codec import JsonData
from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.perf.analysis import Bound
from maxkernel_tui.kernels.report.basis import Clock
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.versions import installed_version

CALIBRATION_FILE_NAME = "calibration.jsonl"
# jax's device_kind on each generation, lower case, first match wins ("TPU v5" alone is a v5p)
_DEVICE_KINDS = (
    ("v5 lite", "v5e"),
    ("v5e", "v5e"),
    ("v6 lite", "v6e"),
    ("v6e", "v6e"),
    ("v5p", "v5p"),
    ("v5", "v5p"),
    ("v4", "v4"),
)


@dataclass(frozen=True)
class KernelFeatures:
    """What the model saw of the kernel (its estimate's breakdown)."""

    bound: Bound
    steps: int
    hbm_bytes: int
    flops: float
    vmem_bytes: int


@dataclass(frozen=True)
class ModelPoint(JsonData):
    """The model's estimate of one kernel on one generation, as a timing worker sends it."""

    target: str
    estimated_s: float
    features: KernelFeatures


@dataclass(frozen=True)
class CalibrationRecord(JsonData):
    kernel: str
    task: str
    target: str  # TPU generation (a key of TARGETS)
    device: str  # jax's device kind
    estimated_s: float
    measured_s: float  # median of the measured runs
    clock: Clock
    features: KernelFeatures
    jax_version: str | None
    libtpu_version: str | None
    recorded_at: float = field(default_factory=time.time)

    @property
    def ratio(self) -> float:
        return self.measured_s / self.estimated_s


@dataclass(frozen=True)
class Calibration:
    """The records the model scales its estimates by, per generation."""

    records: tuple[CalibrationRecord, ...] = ()
    skipped_lines: int = 0  # lines of the file that were not records

    def measurements(self, target: str) -> int:
        return sum(1 for r in self.records if r.target == target)

    def factor(self, target: str) -> float:
        """Median measured / estimated seconds on `target`; 1.0 without a measurement there."""
        ratios = sorted(r.ratio for r in self.records if r.target == target and r.estimated_s > 0)
        return ratios[len(ratios) // 2] if ratios else 1.0

    def counts(self, targets: Iterable[str]) -> dict[str, int]:
        return {t: self.measurements(t) for t in targets if self.measurements(t)}


def default_calibration_file() -> Path:
    return cache_dir() / CALIBRATION_FILE_NAME


def load_calibration(path: Path) -> Calibration:
    """The file's records; a missing file is no calibration, a bad line is skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return Calibration()
    records, skipped = [], 0
    for line in filter(str.strip, lines):
        try:
            records.append(CalibrationRecord.from_json(json.loads(line)))
        except (ValueError, TypeError, KeyError):
            skipped += 1
    return Calibration(tuple(records), skipped)


def append_record(path: Path, record: CalibrationRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record.to_json()) + "\n")


def generation_of(device_kind: str) -> str | None:
    """The TARGETS generation of a jax device kind ("TPU v5 lite" -> v5e); None if unknown."""
    kind = device_kind.lower()
    found = next((target for words, target in _DEVICE_KINDS if words in kind), None)
    return found if found in TARGETS else None


def record_measurement(
    path: Path,
    *,
    kernel: str,
    task: str,
    device: str,
    point: ModelPoint,
    measured_s: float,
    clock: Clock,
) -> CalibrationRecord:
    """Append the record of one measured timing next to the model's estimate; returns it."""
    record = CalibrationRecord(
        kernel=kernel,
        task=task,
        target=point.target,
        device=device,
        estimated_s=point.estimated_s,
        measured_s=measured_s,
        clock=clock,
        features=point.features,
        jax_version=installed_version("jax"),
        libtpu_version=installed_version("libtpu", "libtpu-nightly"),
    )
    append_record(path, record)
    return record
