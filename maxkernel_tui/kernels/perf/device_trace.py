"""Reading device time out of a `jax.profiler` trace: each run's time of one compiled program,
and the DMA-wait and compute shares of a kernel's time on a TPU. No jax at import: only
`load_events` imports `jax.profiler`, to read the xplane.pb file; the rest works on the typed
event list, so it runs (and is tested) anywhere.

A compiled program's events carry the XLA module's name (`jit_<function name>`) in the
`hlo_module` stat. On a TPU's device plane each event of the "XLA Modules" line is one execution
(named `jit_<function name>(<program id>)`); elsewhere (XLA's ops on the CPU backend) the events
of one execution share a `run_id` stat. One run's device time is the span of its events. When
a trace has device planes (`/device:...`), only they count: the host's events of the same module
are dispatch, not device time.

An op's share (`op_seconds`): each event of the "XLA Ops" line that starts within one of the
module's runs, whether or not it names the module (a TPU's op events need not), summed by name
and divided by the runs.

The DMA share (MaxKernel's SyncWait share) is the time of the device events whose names say they
wait on a transfer (`SyncWait`, `dma`, `wait`), over the kernel's device time.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEVICE_PLANE_PREFIX = "/device:"
MODULE_LINE = "XLA Modules"
OPS_LINE = "XLA Ops"
_DMA_WAIT = re.compile(r"syncwait|sync wait|dma|wait", re.IGNORECASE)
_RUN_SUFFIX = re.compile(r"\(\d+\)$")  # a TPU module event is named "jit_f(12)"


@dataclass(frozen=True)
class DeviceEvent:
    """One event of a trace, with the stats this module reads."""

    plane: str
    line: str
    name: str
    start_ns: float
    duration_ns: float
    module: str | None = None  # the `hlo_module` stat, without a "(run)" suffix
    run_id: int | None = None

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class DmaShare:
    """The shares of a kernel's device time spent waiting on DMA and computing (measured)."""

    dma_wait: float
    compute: float
    device_seconds: float
    runs: int

    def describe(self) -> str:
        return (
            f"DMA wait {self.dma_wait:.0%}, compute {self.compute:.0%} of "
            f"{self.device_seconds * 1e3:.3f} ms device time over {self.runs} run(s) "
            "(measured, device trace)"
        )


def load_events(xplane: Path) -> list[DeviceEvent]:
    """Every event of an xplane.pb file, with its module and run stats. Imports jax.profiler."""
    from jax import profiler  # the reader lives in jax; callers are jax worker processes

    data = profiler.ProfileData.from_file(str(xplane))
    events = []
    for plane in data.planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                module = stats.get("hlo_module")
                if module is None and line.name == MODULE_LINE:
                    module = event.name
                run_id = stats.get("run_id")
                events.append(
                    DeviceEvent(
                        plane.name,
                        line.name,
                        event.name,
                        float(event.start_ns),
                        float(event.duration_ns),
                        None if module is None else _RUN_SUFFIX.sub("", str(module)),
                        None if run_id is None else int(run_id),
                    )
                )
    return events


def newest_trace(trace_dir: Path) -> Path | None:
    """The last xplane.pb that `jax.profiler.trace(trace_dir)` wrote, if any."""
    files = sorted(trace_dir.rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None


def module_name(function_name: str) -> str:
    """The XLA module jax.jit names after a function."""
    return f"jit_{function_name}"


def run_seconds(events: Iterable[DeviceEvent], module: str) -> list[float]:
    """Device seconds of each run of `module`, in the order the runs started."""
    runs = _runs(_device_side(list(events)), module)
    ordered = sorted(runs, key=lambda run: min(e.start_ns for e in run))
    return [_span_ns(run) / 1e9 for run in ordered]


def device_run_seconds(xplane: Path, modules: Sequence[str]) -> dict[str, list[float]]:
    """The plain reader over a trace file: each module's device seconds per run."""
    events = load_events(xplane)
    return {module: run_seconds(events, module) for module in modules}


def op_seconds(events: Iterable[DeviceEvent], module: str) -> tuple[int, dict[str, float]]:
    """The number of `module`'s runs on a TPU device plane, and each XLA op's device seconds per
    run, largest first; (0, {}) without such a run."""
    device = [e for e in events if e.plane.startswith(DEVICE_PLANE_PREFIX)]
    runs = [e for e in device if e.line == MODULE_LINE and e.module == module]
    if not runs:
        return 0, {}
    per_op: dict[str, float] = defaultdict(float)
    for event in device:
        if event.line == OPS_LINE and any(r.start_ns <= event.start_ns < r.end_ns for r in runs):
            per_op[event.name] += event.duration_ns / 1e9 / len(runs)
    return len(runs), dict(sorted(per_op.items(), key=lambda item: -item[1]))


def dma_share(events: Iterable[DeviceEvent], module: str | None = None) -> DmaShare | None:
    """DMA-wait and compute shares over the TPU device planes (of `module`'s runs, or of all
    device events); None without a TPU device plane or device time."""
    on_tpu = [e for e in events if e.plane.startswith(DEVICE_PLANE_PREFIX) and "TPU" in e.plane]
    if module is not None:
        on_tpu = [e for e in on_tpu if e.module == module]
    runs = _runs(on_tpu, module) or ([on_tpu] if module is None and on_tpu else [])
    total = sum(_span_ns(run) for run in runs)
    if total <= 0:
        return None
    waiting = sum(
        e.duration_ns for e in on_tpu if e.line != MODULE_LINE and _DMA_WAIT.search(e.name)
    )
    share = min(waiting / total, 1.0)
    return DmaShare(share, 1.0 - share, total / 1e9, len(runs))


def _device_side(events: list[DeviceEvent]) -> list[DeviceEvent]:
    device = [e for e in events if e.plane.startswith(DEVICE_PLANE_PREFIX)]
    return device or events


def _runs(events: Iterable[DeviceEvent], module: str | None) -> list[list[DeviceEvent]]:
    """The events of `module` (or all), one list per run: each "XLA Modules" event is one run
    where there are such (a TPU's device plane), else the events that share a `run_id`."""
    mine = [e for e in events if module is None or e.module == module]
    executions = [[e] for e in mine if e.line == MODULE_LINE]
    if executions:
        return executions
    by_run: dict[tuple[str, int], list[DeviceEvent]] = defaultdict(list)
    for event in mine:
        if event.run_id is not None:
            by_run[(event.plane, event.run_id)].append(event)
    return list(by_run.values())


def _span_ns(run: Sequence[DeviceEvent]) -> float:
    return max(e.end_ns for e in run) - min(e.start_ns for e in run)
