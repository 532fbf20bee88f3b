"""A session's score is one of the two speedups over XLA, the one its limits rank by, with its kind
naming that XLA and the other speedup kept beside it, labelled; the session's log line shows
both. No jax."""

from dataclasses import replace

from maxkernel_tui.agents.orchestration.describe import describe
from maxkernel_tui.agents.orchestration.events import ProfileDone, SessionEnded
from maxkernel_tui.agents.orchestration.limits import LoopLimits
from maxkernel_tui.agents.orchestration.scoring import estimated_score, measured_score
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.perf.vs_xla import VsXla, XlaBaseline, XlaFigure
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.report.checks import EvalReport, Timing
from tests.support.engine import summary

WRITTEN = XlaFigure(XlaBaseline.AS_WRITTEN, 1, 0.349, Basis.ESTIMATED, "v5e")
TOLERANCE = XlaFigure(XlaBaseline.TOLERANCE, 3, 1.02, Basis.ESTIMATED, "v5e")


def _profile(both: VsXla) -> ProfileSummary:
    found = summary(0.349)
    return replace(found, estimates=[replace(found.estimates[0], vs_xla=both)])


def test_a_session_ranks_by_xla_at_the_tolerance_s_passes_unless_told_otherwise():
    assert LoopLimits().rank_by == XlaBaseline.TOLERANCE
    score = estimated_score(_profile(VsXla(WRITTEN, TOLERANCE)), "v5e")
    assert (score.value, score.kind) == (1.02, "estimated speedup vs XLA@3-pass (tolerance) on v5e")
    assert score.also == "0.35x XLA@1-pass (as written) (est., v5e)"


def test_ranked_by_xla_as_written_the_tolerance_s_figure_is_the_one_beside():
    score = estimated_score(_profile(VsXla(WRITTEN, TOLERANCE)), "v5e", XlaBaseline.AS_WRITTEN)
    assert (score.value, score.kind) == (
        0.349,
        "estimated speedup vs XLA@1-pass (as written) on v5e",
    )
    assert score.also == "1.02x XLA@3-pass (tolerance) (est., v5e)"


def test_without_the_tolerance_s_passes_the_score_says_it_is_against_xla_as_written():
    score = estimated_score(_profile(VsXla(WRITTEN)), "v5e")
    assert score.value == 0.349 and "(as written)" in score.kind
    assert score.also == "vs XLA@tolerance: not known"


def test_a_measured_score_is_against_xla_as_written_and_says_the_other_is_not_measured():
    timing = Timing("speedup over the XLA reference", Basis.MEASURED, "TPU v5 lite", "", ratio=1.3)
    report = EvalReport("41k", "k.py", ["v5e"], "TPU v5 lite", [], [timing], [0])
    score = measured_score(report)
    assert score is not None and score.value == 1.3
    assert score.kind == "measured speedup vs XLA (as written) on TPU v5 lite"
    assert score.also == "vs XLA@tolerance: not measured"
    # beside it, the model's figure against XLA at the tolerance's passes
    score = measured_score(report, _profile(VsXla(WRITTEN, TOLERANCE)), "v5e")
    assert score is not None and score.also == (
        "vs XLA@tolerance: not measured; 1.02x XLA@3-pass (tolerance) (est., v5e)"
    )


def test_the_session_s_profile_and_end_lines_show_both_figures_labelled():
    score = estimated_score(_profile(VsXla(WRITTEN, TOLERANCE)), "v5e")
    event = ProfileDone("p", "s1", 2, score.value, score.kind, None, score_also=score.also)
    both = (
        "1.02 (estimated speedup vs XLA@3-pass (tolerance) on v5e; "
        "0.35x XLA@1-pass (as written) (est., v5e))"
    )
    assert describe(event) == f"  profile: {both}"
    ended = SessionEnded("end/1", "max iterations (1)", 2, score.value, score.kind, 1, score.also)
    assert describe(ended) == f"session ended: max iterations (1); best kernel v1, {both}"
