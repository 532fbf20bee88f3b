"""Which measured paths run: all with a TPU, none without, each saying what runs instead."""

from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingSamples
from maxkernel_tui.kernels.evaluation.timing.device_timer import record_timing
from maxkernel_tui.kernels.evaluation.timing.measured_paths import measured_paths
from maxkernel_tui.kernels.perf.calibration import KernelFeatures, ModelPoint


def test_without_a_tpu_no_path_is_active_and_each_says_what_runs_instead(tmp_path):
    path = tmp_path / "calibration.jsonl"
    names = [p.name for p in measured_paths(tpu=False, calibration_file=path)]
    assert names == [
        "device timing",
        "measured autotune",
        "calibration",
        "device numerics",
        "DMA share",
    ]
    off = {p.name: p for p in measured_paths(tpu=False, calibration_file=path)}
    assert not any(p.active for p in off.values())
    assert off["measured autotune"].detail == "the model's estimate chooses"
    assert off["calibration"].detail.endswith("0 record(s) in the calibration file")
    features = KernelFeatures("memory", 1, 1, 0.0, 1)
    answer = TimingAnswer(
        "TPU v5 lite", "tpu", TimingSamples([1e-3], [1e-3]), model=ModelPoint("v5e", 1e-3, features)
    )
    record_timing(answer, "k.py", "t", path)
    on = {p.name: p for p in measured_paths(tpu=True, calibration_file=path)}
    assert all(p.active for p in on.values())
    assert "profiler trace" in on["device timing"].detail
    assert on["calibration"].detail.endswith("1 record(s) in the calibration file")
