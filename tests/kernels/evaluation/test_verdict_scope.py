"""Every verdict says where it was earned and lists its evidence, in the report, `eval`'s text,
`bench`'s line and an export. Plain data, no jax."""

from dataclasses import replace

from maxkernel_tui.commands.bench import BenchRow, _format_row
from maxkernel_tui.kernels.report.checks import (
    FAIL,
    PARTLY_VERIFIED,
    PASS,
    SKIP,
    SMALL_SHAPES_ONLY,
    VERIFIED_AT_PRODUCTION,
    Check,
    EvalReport,
    format_report,
)
from maxkernel_tui.kernels.report.reasons import (
    Agreement,
    Ratio,
    Reason,
    RunFigures,
    Said,
    TilesFigures,
    Timed,
)
from maxkernel_tui.services.export import evaluation_markdown

TILES = TilesFigures("bench", 0, 77, 8, 128)
NUMERICS_OK = Check("numerics", PASS, Reason.WITHIN_TOLERANCE, Agreement(()))
TILES_OK = Check("tiles", PASS, Reason.TILES_SAMPLED, TILES)


def _report(*checks: Check) -> EvalReport:
    report = EvalReport("41k", "kernel.py", ["v5e"], "CPU", checks=list(checks))
    report.inputs = ["numerics: check on 3 fresh seed(s)", "heldout: heldout on 1 fresh seed(s)"]
    return report


def test_a_verdict_is_verified_at_production_shapes_only_when_a_check_compared_them():
    small = _report(NUMERICS_OK, Check("tiles", SKIP, Reason.TILES_NOT_RUN, Said("budget")))
    assert small.scope == SMALL_SHAPES_ONLY
    assert small.verdict_line == f"verdict: ACCEPTED, {SMALL_SHAPES_ONLY}"
    assert "production tiles (skip): production tiles not run: budget" in small.evidence
    tiles = _report(NUMERICS_OK, TILES_OK)
    assert tiles.scope == VERIFIED_AT_PRODUCTION
    assert tiles.evidence[-1] == (
        "production tiles (pass): 8 of 128 output blocks, sample seed 77, inputs seed 0"
    )
    full = _report(replace(NUMERICS_OK, production_shapes=True))
    timed = Timed(Ratio(1.2, 1.1, 1.3), True)
    device = _report(Check("timing", PASS, Reason.SPEEDUP_SIGNIFICANT, timed, 0.0, True))
    assert full.scope == device.scope == VERIFIED_AT_PRODUCTION
    assert "device numerics at production shapes (pass)" in device.evidence
    # a skipped check earns nothing, whatever its data says
    assert _report(replace(TILES_OK, status=SKIP)).scope == SMALL_SHAPES_ONLY


def test_a_training_kernel_is_verified_at_production_only_for_what_its_samples_decided():
    backward = Check("tiles", PASS, Reason.TILES_SAMPLED, replace(TILES, gradients="x"))
    both = Check("tiles", PASS, Reason.TILES_SAMPLED, replace(TILES, gradients="x, scale"))
    not_forward = Check("tiles", SKIP, Reason.TILES_NOT_RUN, Said("mixes every block"))

    def trained(*checks: Check) -> EvalReport:
        return replace(_report(NUMERICS_OK, *checks), gradients=["x", "scale"])

    assert trained(TILES_OK, both).scope == VERIFIED_AT_PRODUCTION
    # a norm's scale summed over every block: the sample decides none of its elements
    assert trained(TILES_OK, backward).scope == (
        f"{PARTLY_VERIFIED} (the outputs, the gradient of x; the gradient of scale at small "
        "shapes only)"
    )
    # a loss the XLA after the kernels mixes: only the gradients were compared there
    assert trained(not_forward, both).scope == (
        f"{PARTLY_VERIFIED} (the gradient of x, the gradient of scale; the outputs at small "
        "shapes only)"
    )
    assert trained(not_forward, replace(both, status=FAIL)).scope == SMALL_SHAPES_ONLY
    # compared in full at production: outputs and gradients alike
    assert trained(replace(NUMERICS_OK, production_shapes=True)).scope == VERIFIED_AT_PRODUCTION
    # the device compares a training kernel's backward program: its gradients, not its outputs
    timed = Timed(Ratio(1.2, 1.1, 1.3), True)
    device = Check("timing", PASS, Reason.SPEEDUP_SIGNIFICANT, timed, 0.0, True)
    assert trained(not_forward, device).scope == (
        f"{PARTLY_VERIFIED} (the gradient of x, the gradient of scale; the outputs at small "
        "shapes only)"
    )
    assert trained(TILES_OK, device).scope == VERIFIED_AT_PRODUCTION
    # the field travels with the report's JSON, and a forward-only report's JSON is as before
    assert EvalReport.from_json(trained(TILES_OK).to_json()).gradients == ["x", "scale"]
    assert "gradients" not in _report(TILES_OK).to_json()


def test_a_rejection_names_its_reason_and_every_face_shows_the_scope():
    rejected = _report(Check("tiles", FAIL, Reason.TILES_MALFORMED, TILES))
    assert rejected.verdict_line == (
        "verdict: REJECTED: tiles: bench inputs seed 0, sample seed 77: malformed tile files"
    )
    accepted = _report(NUMERICS_OK, TILES_OK)
    text = format_report(accepted)
    assert text.endswith(f"verdict: ACCEPTED, {VERIFIED_AT_PRODUCTION}")
    assert "  evidence: numerics: check on 3 fresh seed(s)" in text
    again = EvalReport.from_json(accepted.to_json())
    assert again.scope == VERIFIED_AT_PRODUCTION and accepted.to_json()["evidence"] == (
        accepted.evidence
    )
    markdown = "\n".join(evaluation_markdown(accepted.to_json(), 0.0))
    assert f"**ACCEPTED**, {VERIFIED_AT_PRODUCTION}" in markdown
    assert "- evidence: production tiles (pass): 8 of 128 output blocks" in markdown
    row = BenchRow("k", "41k", "41k.py", "accepted", None, "", [], 1.0, scope=accepted.scope)
    assert _format_row(row).endswith(VERIFIED_AT_PRODUCTION)
    assert BenchRow.from_json(row.to_json()) == row


def test_evidence_lists_only_the_checks_that_ran():
    """A kernel stopped at trace or compile never ran its numerics: the evidence says so
    instead of naming seeds that were never drawn."""
    stopped = _report(
        Check("static", PASS, Reason.STATIC_OK), Check("trace", FAIL, Reason.NO_PALLAS_CALL)
    )
    stopped.inputs.insert(0, "trace, tpu_lower, tpu_compile: production shapes (bench)")
    assert stopped.evidence == [
        "trace: production shapes (bench)",
        "tpu_lower, tpu_compile: not run (stopped at trace)",
        "numerics: not run (stopped at trace)",
        "heldout: not run (stopped at trace)",
    ]
    at_numerics = _report(Check("numerics", FAIL, Reason.NO_OUTPUT, RunFigures("check", 1)))
    assert at_numerics.evidence == [
        "numerics: check on 3 fresh seed(s)",
        "heldout: not run (stopped at numerics)",
    ]
    assert "  evidence: heldout: not run (stopped at numerics)" in format_report(at_numerics)


def test_a_skipped_tiles_check_does_not_read_as_sampled():
    """Blocks were planned (data) but nothing was compared: the line says why, not how many."""
    skipped = _report(NUMERICS_OK, replace(TILES_OK, status=SKIP, reason=Reason.TILES_NONE_DECIDED))
    tiles_line = skipped.evidence[-1]
    assert tiles_line.startswith("production tiles (skip): production tiles not compared (bench")
    assert "output blocks" not in tiles_line
