"""The kernel beside its task's expert: measured on a TPU with the same interleaved statistics,
estimated elsewhere, carried through reports and counted by `bench` (pure data, milliseconds)."""

import random

from maxkernel_tui.commands.bench import BenchRow, _format_row, _format_totals, _totals
from maxkernel_tui.kernels.evaluation.expert_comparison import from_estimates, measured
from maxkernel_tui.kernels.evaluation.protocol import TimingAnswer, TimingSamples
from maxkernel_tui.kernels.evaluation.timing.check import summarize_timing
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.report.checks import PASS, Check, EvalReport, format_report
from maxkernel_tui.kernels.report.expert import EXPERT_SPEEDUP, ExpertComparison
from maxkernel_tui.kernels.report.reasons import Reason, Timed


def _samples(center, seed):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-0.02, 0.02)) for _ in range(50)]


def test_on_a_tpu_the_expert_is_timed_interleaved_and_named_in_the_timing_check():
    samples = TimingSamples(_samples(1.0, 0), _samples(1.2, 1), expert=_samples(0.9, 2))
    check, timings = summarize_timing(TimingAnswer("TPU v5 lite", "tpu", samples))
    assert check.reason == Reason.SPEEDUP_SIGNIFICANT and isinstance(check.figures, Timed)
    assert check.figures.expert is not None and check.figures.expert.high < 1.0  # slower
    assert EXPERT_SPEEDUP in check.detail  # its words, once
    comparison = measured("expert.py", timings)
    assert comparison.kind == "measured" and 0.85 < comparison.ratio < 0.95
    assert comparison.ci95 is not None and "TPU v5 lite" in comparison.label


def _estimate(seconds):
    return Estimate(
        "v5e", "estimated", seconds, "compute", 0, 0, 0, 0, 0.0, 0, 0, True, None, None, None, None
    )


def test_off_a_tpu_the_comparison_is_the_models_and_says_so_through_a_report_round_trip():
    comparison = from_estimates(_estimate(2e-3), _estimate(1e-3), "expert.py")
    assert comparison.ratio == 0.5 and not comparison.matches
    report = EvalReport(
        "8p_GEMM", "k.py", ["v5e"], "cpu", [Check("static", PASS, Reason.STATIC_OK)]
    )
    report.expert = comparison
    again = EvalReport.from_json(report.to_json())
    assert again.expert == comparison
    assert "expert: 0.50x of the expert" in format_report(again)
    assert "estimated on v5e (performance model" in format_report(again)
    assert "expert.py (JAXBench's tuning, made on TPU v6e)" in format_report(again)


def test_bench_shows_a_vs_expert_column_and_counts_kernels_matching_the_expert(tmp_path):
    def row(task, ratio):
        expert = (
            None
            if ratio is None
            else ExpertComparison("estimated", "v5e", "expert.py", 1.0, ratio, ratio)
        )
        return BenchRow("k", task, f"{task}.py", "accepted", None, "", [], 1.0, expert)

    rows = [row("8p_GEMM", 0.96), row("1p_Flash_Attention", 0.5), row("12p_RMSNorm", None)]
    again = [BenchRow.from_json(r.to_json()) for r in rows]
    assert again == rows
    assert "0.96x e" in _format_row(rows[0]) and "0.96x" not in _format_row(rows[2])
    totals = _totals(rows)
    assert (totals.with_expert, totals.match_expert) == (2, 1)
    assert "at >= 0.95x of the expert: 1/2" in _format_totals(totals, tmp_path / "r.jsonl")
