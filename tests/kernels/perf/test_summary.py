"""A profile summary from a stubbed analysis: its JSON (stored, read back), table and text."""

import json
from dataclasses import replace

import pytest

from maxkernel_tui.kernels.evaluation.profiling.profile import summarize
from maxkernel_tui.kernels.perf.analysis import (
    Block,
    KernelAnalysis,
    ProfileAnswer,
    ReferenceCost,
    Trace,
    TraceEvent,
)
from maxkernel_tui.kernels.perf.summary import ProfileSummary

MIB = 2**20

KERNEL = KernelAnalysis(
    name="_rms_kernel",
    grid=[256],
    dimension_semantics=["parallel"],
    blocks=[
        Block("input 0", [128, 8192], [8, 4096, 8192], "bfloat16", "vmem", 2 * MIB, 256),
        Block("output 0", [128, 8192], [8, 4096, 8192], "bfloat16", "vmem", 2 * MIB, 256),
    ],
    scalar_prefetch=0,
    vmem_bytes=8 * MIB,
    vmem_limit_bytes=None,
    hbm_bytes=1024 * MIB,
    steps=256,
    mxu_flops_per_step=0.0,
    mxu_f32_flops_per_step=0.0,
    vector_ops_per_step=4 * 128 * 8192,
    transcendentals_per_step=128,
)
ANSWER = ProfileAnswer(
    config="bench",
    kernels=[KERNEL],
    reference_costs={
        "v5e": ReferenceCost(flops=1e9, bytes_accessed=1.2e9, optimal_seconds=1.5e-3),
        "v6e": ReferenceCost(error="RESOURCE_EXHAUSTED"),
    },
    io_bytes=1024 * MIB,
    trace=Trace(
        "/traces/12p", "check", "host-side trace of a CPU run", 0.4, [TraceEvent("x", 1.5)]
    ),
)


def test_the_profile_answer_crosses_the_process_unchanged():
    assert ProfileAnswer.from_json(json.loads(json.dumps(ANSWER.to_json()))) == ANSWER


def test_a_stored_summary_reads_back_with_its_labels_dropped():
    summary = summarize("12p_RMSNorm", "k.py", ANSWER, ("v5e", "v6e"))
    stored = json.loads(json.dumps(summary.to_json()))
    assert stored["reference_costs"]["v5e"]["kind"] == "estimated"
    assert stored["reference_costs"]["v6e"] == {
        "error": "RESOURCE_EXHAUSTED",
        "kind": "estimated",
        "source": "XLA cost analysis, AOT compile for v6e",
    }
    again = ProfileSummary.from_json(stored)
    assert again == summary and again.to_json() == stored


def test_a_failed_reference_cost_is_a_problem_and_leaves_the_estimate_without_roofline():
    summary = summarize("12p_RMSNorm", "k.py", ANSWER, ("v5e", "v6e"))
    v5e, v6e = summary.estimates
    assert v5e.bound == "memory" and v5e.roofline_share is not None and v5e.speedup is not None
    assert v6e.roofline_share is None and v6e.speedup is None
    assert summary.problems == ["XLA cost of the reference on v6e: RESOURCE_EXHAUSTED"]


def test_table_and_text_say_what_is_estimated():
    summary = summarize("12p_RMSNorm", "k.py", ANSWER, ("v5e",))
    (row,) = summary.table_rows()
    assert row[0] == "v5e" and row[1] == "8.0/16 MiB" and row[3] == "memory"
    text = summary.to_text()
    assert "all figures estimated by the model unless marked measured" in text
    assert "kernel 0 _rms_kernel: grid [256] (parallel); 256 steps" in text
    assert "trace (host-side trace of a CPU run, check shapes): x 1.5 ms" in text
    assert not summary.trace.measured


def test_a_kernel_that_states_no_dimension_semantics_says_what_mosaic_takes():
    unstated = replace(KERNEL, grid=[8, 512], dimension_semantics=[])
    answer = replace(ANSWER, kernels=[unstated])
    text = summarize("12p_RMSNorm", "k.py", answer, ("v5e",)).to_text()
    assert "grid [8, 512] (arbitrary, arbitrary: not stated, Mosaic's default);" in text


def test_the_estimate_against_xla_is_one_line_with_both_xlas_labelled():
    # a matmul-heavy reference: XLA at the tolerance's three MXU passes takes three times the
    # MXU time of XLA as written (one pass), and the line says which figure is which
    matmul = ReferenceCost(flops=2e13, bytes_accessed=1.2e9)
    answer = replace(ANSWER, reference_costs={"v5e": matmul}, written_passes=1, tolerance_passes=3)
    summary = summarize("41k", "k.py", answer, ("v5e",))
    both = summary.estimates[0].speedups
    assert both.tolerance is not None and both.tolerance.passes == 3
    assert both.tolerance.speedup == pytest.approx(3 * (both.as_written.speedup or 0), rel=0.05)
    line = summary.against_xla("v5e")
    assert line.startswith(
        f"against XLA on TPU v5e: {both.tolerance.speedup:.2f}x XLA@3-pass (tolerance) · "
        f"{both.as_written.speedup:.2f}x XLA@1-pass (as written) (est., v5e) (estimated by the "
    )
    assert "not measured" in line and "the task's reference as written, compiled by XLA" in line
    assert "3-pass (tolerance)" in summary.to_text() and "1-pass (as written)" in summary.to_text()
    assert summary.table_rows()[0][-1] == both.short()
    assert summary.tolerance_passes() == 3


def test_a_tolerance_not_found_is_said_and_an_unknown_estimate_says_why():
    summary = summarize("12p_RMSNorm", "k.py", ANSWER, ("v5e", "v6e"))
    speedup = summary.estimates[0].speedup
    assert summary.against_xla("v5e").startswith(
        f"against XLA on TPU v5e: {speedup:.2f}x XLA@1-pass (as written) (est., v5e) · "
        "vs XLA@tolerance: not known (estimated by the performance"
    )
    assert summary.tolerance_passes() is None
    assert summary.against_xla("v6e") == (
        "against XLA on TPU v6e: not estimated "
        "(XLA cost of the reference on v6e: RESOURCE_EXHAUSTED)"
    )
