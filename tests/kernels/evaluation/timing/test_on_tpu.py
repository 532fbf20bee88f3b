"""The measured paths on a real TPU: device-time timing with device numerics and a calibration
record, the measured autotuner's timer, and the DMA share of a device trace. Skipped with the
reason anywhere else (these machines have no TPU; the CPU tests cover every piece around them).
"""

import pytest

from maxkernel_tui.kernels.evaluation.profiling.profile import profile_kernel
from maxkernel_tui.kernels.evaluation.protocol import DEVICE_TRACE
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.evaluation.timing.check import timing_check, tpu_present
from maxkernel_tui.kernels.evaluation.timing.device_timer import DeviceTimer
from maxkernel_tui.kernels.evaluation.tracer.tracing import trace_source
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.perf.calibration import load_calibration
from maxkernel_tui.kernels.report.reasons import Timed
from maxkernel_tui.kernels.snapshot import snapshot_task
from tests.support.paths import KERNELS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not tpu_present(),
        reason="needs a TPU (no /dev/accel* or /dev/vfio device here, so jax.devices() has no "
        "tpu): timing, measured autotune, calibration, device numerics and the DMA share are "
        "measured only on one",
    ),
]
HONEST = KERNELS / "honest" / "12p_RMSNorm.py"


def test_timing_on_a_tpu_reads_device_time_checks_numerics_and_records_calibration(
    suite_tasks, tmp_path
):
    task = find_task("12p", suite_tasks)
    calibration = tmp_path / "calibration.jsonl"
    program = tmp_path / "program.bin"
    program.write_bytes(
        trace_source(HONEST.read_text(), snapshot_task(task, tmp_path), timeout=300)[
            task.configs[0]
        ]
    )
    check, timings = timing_check(
        program, HONEST.name, task, timeout=600, calibration_file=calibration
    )
    assert check.status == "pass", check.detail
    assert isinstance(check.figures, Timed) and check.production_shapes
    assert check.figures.device_clock
    numerics = check.figures.device_numerics
    assert numerics is not None and numerics.ok and numerics.config == task.configs[0]
    assert all(t.kind == "measured" and "(tpu)" in t.device for t in timings)
    (record,) = load_calibration(calibration).records
    assert record.clock == DEVICE_TRACE and record.measured_s > 0 and record.estimated_s > 0


def test_the_autotuners_timer_measures_a_source_on_the_tpu(suite_tasks, tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path))
    timer = DeviceTimer(find_task("12p", suite_tasks), repeats=5, warmups=1)
    samples = timer.time(HONEST.read_text())
    assert len(samples) == 5 and all(s > 0 for s in samples)
    assert timer.clock.startswith("device trace on TPU")


def test_a_profile_on_a_tpu_shows_the_measured_dma_share(suite_tasks, tmp_path):
    summary = profile_kernel(
        KernelSource.read(HONEST), find_task("12p", suite_tasks), trace_root=tmp_path
    )
    assert summary.trace is not None and summary.trace.measured
    assert summary.trace.dma is not None
    assert "(measured, device trace)" in summary.to_text()
