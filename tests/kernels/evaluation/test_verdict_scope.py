"""Every verdict says where it was earned and lists its evidence, in the report, `eval`'s text,
`bench`'s line and an export. Plain data, no jax."""

from maxkernel_tui.commands.bench import BenchRow, _format_row
from maxkernel_tui.kernels.report.checks import (
    FAIL,
    PASS,
    PRODUCTION_SHAPES,
    SKIP,
    SMALL_SHAPES_ONLY,
    VERIFIED_AT_PRODUCTION,
    Check,
    EvalReport,
    format_report,
)
from maxkernel_tui.services.export import evaluation_markdown

TILES_DATA = {"blocks": 8, "of_blocks": 128, "sample_seed": 77, "input_seed": 0}


def _report(*checks: Check) -> EvalReport:
    report = EvalReport("41k", "kernel.py", ["v5e"], "CPU", checks=list(checks))
    report.inputs = ["numerics: check on 3 fresh seed(s)", "heldout: heldout on 1 fresh seed(s)"]
    return report


def test_a_verdict_is_verified_at_production_shapes_only_when_a_check_compared_them():
    small = _report(Check("numerics", PASS, "ok"), Check("tiles", SKIP, "not run: budget"))
    assert small.scope == SMALL_SHAPES_ONLY
    assert small.verdict_line == f"verdict: ACCEPTED, {SMALL_SHAPES_ONLY}"
    assert "production tiles (skip): not run: budget" in small.evidence
    tiles = _report(Check("numerics", PASS, "ok"), Check("tiles", PASS, "ok", data=TILES_DATA))
    assert tiles.scope == VERIFIED_AT_PRODUCTION
    assert tiles.evidence[-1] == (
        "production tiles (pass): 8 of 128 output blocks, sample seed 77, inputs seed 0"
    )
    full = _report(Check("numerics", PASS, "bench seed 1 ...", data={PRODUCTION_SHAPES: True}))
    device = _report(Check("timing", PASS, "1.2x", data={PRODUCTION_SHAPES: True}))
    assert full.scope == device.scope == VERIFIED_AT_PRODUCTION
    assert "device numerics at production shapes (pass)" in device.evidence
    # a skipped check earns nothing, whatever its data says
    assert _report(Check("tiles", SKIP, "x", data=TILES_DATA)).scope == SMALL_SHAPES_ONLY


def test_a_rejection_names_its_reason_and_every_face_shows_the_scope():
    rejected = _report(Check("tiles", FAIL, "bench ...: wrong numerics at production shapes"))
    assert rejected.verdict_line == (
        "verdict: REJECTED: tiles: bench ...: wrong numerics at production shapes"
    )
    accepted = _report(Check("numerics", PASS, "ok"), Check("tiles", PASS, "ok", data=TILES_DATA))
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
    stopped = _report(Check("static", PASS, "ok"), Check("trace", FAIL, "no pallas_call"))
    stopped.inputs.insert(0, "trace, tpu_lower, tpu_compile: production shapes (bench)")
    assert stopped.evidence == [
        "trace: production shapes (bench)",
        "tpu_lower, tpu_compile: not run (stopped at trace)",
        "numerics: not run (stopped at trace)",
        "heldout: not run (stopped at trace)",
    ]
    at_numerics = _report(Check("numerics", FAIL, "wrong numerics"))
    assert at_numerics.evidence == [
        "numerics: check on 3 fresh seed(s)",
        "heldout: not run (stopped at numerics)",
    ]
    assert "  evidence: heldout: not run (stopped at numerics)" in format_report(at_numerics)


def test_a_skipped_tiles_check_does_not_read_as_sampled():
    """Blocks were planned (data) but nothing was compared: the line says why, not how many."""
    skipped = _report(
        Check("numerics", PASS, "ok"),
        Check(
            "tiles", SKIP, "production tiles not compared: the reference failed", data=TILES_DATA
        ),
    )
    tiles_line = skipped.evidence[-1]
    assert tiles_line == (
        "production tiles (skip): production tiles not compared: the reference failed"
    )
    assert "output blocks" not in tiles_line
