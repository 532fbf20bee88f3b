"""The calibration file: every measured TPU timing appends a record, the model scales its
estimates by them per generation, and the profile says by how many measurements."""

import json

import pytest

from maxkernel_tui.kernels.evaluation.profiling.profile import summarize
from maxkernel_tui.kernels.evaluation.protocol import (
    DEVICE_TRACE,
    TimingAnswer,
    TimingSamples,
)
from maxkernel_tui.kernels.evaluation.timing.device_timer import record_timing
from maxkernel_tui.kernels.perf.analysis import Block, KernelAnalysis, ProfileAnswer
from maxkernel_tui.kernels.perf.calibration import (
    KernelFeatures,
    ModelPoint,
    generation_of,
    load_calibration,
)
from maxkernel_tui.kernels.perf.model import estimate
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.versions import installed_version

MIB = 2**20
KERNEL = KernelAnalysis(
    name="_copy_kernel",
    grid=[64],
    dimension_semantics=["parallel"],
    blocks=[
        Block("input 0", [256, 1024], [16384, 1024], "float32", "vmem", 1 * MIB, 64),
        Block("output 0", [256, 1024], [16384, 1024], "float32", "vmem", 1 * MIB, 64),
    ],
    scalar_prefetch=0,
    vmem_bytes=4 * MIB,
    vmem_limit_bytes=None,
    hbm_bytes=128 * MIB,
    steps=64,
    mxu_flops_per_step=0.0,
    mxu_f32_flops_per_step=0.0,
    vector_ops_per_step=256 * 1024,
    transcendentals_per_step=0,
)
FEATURES = KernelFeatures(bound="memory", steps=64, hbm_bytes=128 * MIB, flops=0.0, vmem_bytes=0)


def measured(median_s, *, platform="tpu", model=True):
    return TimingAnswer(
        device="TPU v5 lite",
        platform=platform,
        samples=TimingSamples(candidate=[median_s * f for f in (0.9, 1.0, 1.1)], reference=[1.0]),
        clock=DEVICE_TRACE,
        model=ModelPoint("v5e", 1.0e-3, FEATURES) if model else None,
    )


def test_each_measured_timing_is_a_record_and_the_model_scales_by_their_median(tmp_path):
    path = tmp_path / "calibration.jsonl"
    for median_s in (1.2e-3, 1.4e-3, 1.3e-3):
        record_timing(measured(median_s), "kernel.py", "12p_RMSNorm", path)
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])
    assert first["measured_s"] == pytest.approx(1.2e-3) and first["estimated_s"] == 1.0e-3
    assert first["target"] == "v5e" and first["device"] == "TPU v5 lite"
    assert first["clock"] == "device trace" and first["features"]["bound"] == "memory"
    assert first["jax_version"] == installed_version("jax") and "libtpu_version" in first
    calibration = load_calibration(path)
    assert calibration.factor("v5e") == pytest.approx(1.3) and calibration.measurements("v5e") == 3
    plain = estimate([KERNEL], TARGETS["v5e"])
    calibrated = estimate([KERNEL], TARGETS["v5e"], calibration=calibration)
    assert calibrated.seconds == pytest.approx(plain.seconds * 1.3)
    assert calibrated.kind == "estimated, calibrated"
    other = estimate([KERNEL], TARGETS["v6e"], calibration=calibration)
    assert other.kind == "estimated"  # no measurement on a v6e: the model alone
    answer = ProfileAnswer(config="bench", kernels=[KERNEL], reference_costs={})
    summary = summarize("12p", "kernel.py", answer, ("v5e", "v6e"), path)
    text = summary.to_text()
    assert "v5e (estimated, calibrated by 3 TPU measurements):" in text
    assert "v6e (estimated):" in text
    assert summary.calibration == {"v5e": 3}


def test_times_off_a_tpu_or_without_an_estimate_record_nothing(tmp_path):
    path = tmp_path / "calibration.jsonl"
    assert record_timing(measured(1e-3, platform="cpu"), "k.py", "t", path) is None
    assert record_timing(measured(1e-3, model=False), "k.py", "t", path) is None
    assert not path.exists()


def test_a_damaged_line_is_skipped_and_counted_and_the_rest_still_apply(tmp_path):
    path = tmp_path / "calibration.jsonl"
    record_timing(measured(2e-3), "k.py", "t", path)
    with path.open("a") as out:
        out.write('{"half a record\n{"kernel": "no other field"}\n')
    record_timing(measured(2e-3), "k.py", "t", path)
    calibration = load_calibration(path)
    assert calibration.skipped_lines == 2 and calibration.measurements("v5e") == 2
    assert calibration.factor("v5e") == pytest.approx(2.0)
    assert load_calibration(tmp_path / "missing.jsonl").records == ()


@pytest.mark.parametrize(
    ("kind", "generation"),
    [
        ("TPU v5 lite", "v5e"),
        ("TPU v5e", "v5e"),
        ("TPU v5", "v5p"),
        ("TPU v5p", "v5p"),
        ("TPU v6 lite", "v6e"),
        ("TPU v4", "v4"),
        ("cpu", None),
    ],
)
def test_device_kinds_name_their_generation(kind, generation):
    assert generation_of(kind) == generation
