"""A check's reason and figures: every code has words, and both cross JSON intact."""

from __future__ import annotations

import pytest

from maxkernel_tui.kernels.report.checks import FAIL, PASS, SKIP, Check, EvalReport
from maxkernel_tui.kernels.report.expert import ExpertComparison
from maxkernel_tui.kernels.report.reasons import (
    Agreement,
    At,
    Comparison,
    Configs,
    Confinement,
    Defence,
    DefenceName,
    DefenceOutcome,
    Defences,
    DeviceNumerics,
    Finding,
    MatmulWork,
    Misfit,
    NoFigures,
    NotJudged,
    OutsidePallas,
    Problems,
    Ratio,
    Reason,
    RuleBroken,
    RunFigures,
    Said,
    StaticRule,
    Target,
    TilesFigures,
    Timed,
    TracerClaim,
    Unbelievable,
    Unfit,
    WorkerFailed,
    WorkShare,
)
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.report.words import check_words

CLOSE = Comparison(True, 1e-3, 1e-4, 0.5, (2, 3), 0, 16)
TILES = TilesFigures("bench", 0, 7, 2, 16, ("kernel 1",), 32, 1e-3, 1e-3, CLOSE, text="why")
RUN = RunFigures("bench", 1, 1e-3, 1e-3, CLOSE, "boom")
WORK, PASSED, FAILED = DefenceName.WORK, DefenceOutcome.PASSED, DefenceOutcome.FAILED
ON_DEVICE = DeviceNumerics(True, "bench")
MISFIT = Misfit("k", 0, 0, 512, 256)
MATMULS = MatmulWork("bench", 1e9, 1e9, 0.0, 0.9)
# Figures each reason is made with (evaluation/): a reason not here is made with Said.
FIGURES: dict[Reason, object] = {
    Reason.STATIC_OK: NoFigures(),
    Reason.STATIC_RULES_BROKEN: Problems(
        (RuleBroken(StaticRule.NO_ENTRY_POINT, "a"), RuleBroken(StaticRule.HOST_CALLBACK, "b"))
    ),
    Reason.WORKER_TIMED_OUT: WorkerFailed("candidate", "timed out after 15 s"),
    Reason.WORKER_OUT_OF_MEMORY: WorkerFailed("candidate", "died", 4.0),
    Reason.WORKER_CRASHED: WorkerFailed("tracer", "died"),
    Reason.TRACER_NO_PROGRAM: Configs(("check",)),
    Reason.PROGRAM_REFUSED: At("bench", "not a plain file"),
    Reason.EXPERT_NOT_COMPARED: At("expert.py", "no estimate for the kernel or the expert"),
    Reason.NO_PALLAS_CALL: NoFigures(),
    Reason.TRACER_UNBELIEVABLE: Unbelievable(TracerClaim.JUDGES_CHECK, "trace", "pass"),
    Reason.HEAVY_WORK_OUTSIDE_PALLAS: OutsidePallas(2e9, 0.0, 0.0, 0.0, ("dot_general",)),
    Reason.EXPERT_WORK_OUTSIDE_PALLAS: OutsidePallas(2e9, 0.0, 0.0, 0.0, (), "outputs f32"),
    Reason.PALLAS_HOLDS_THE_WORK: WorkShare(1, 0.0, 0.0, "outputs float32[8]"),
    Reason.BACKWARD_WORK_OUTSIDE_PALLAS: OutsidePallas(2e9, 0.0, 3e9, 0.0, ("dot_general",)),
    Reason.BACKWARD_IN_PALLAS: WorkShare(3, 0.0, 0.0, "gradients of x, w"),
    Reason.GRADIENT_OUTSIDE_TOLERANCE: RunFigures("check", 1, 1e-3, 1e-3, gradient="x"),
    Reason.LOWERED: NoFigures(),
    Reason.COMPILED: Target("v5e"),
    Reason.COMPILE_FAILED: Target("v5e", "Mosaic failed"),
    Reason.NO_CHECK_CONFIG: NoFigures(),
    Reason.DEFENCES_HELD: Defences((Defence(WORK, PASSED, Finding.ENOUGH_WORK, MATMULS),)),
    Reason.DEFENCES_BROKEN: Defences((Defence(WORK, FAILED, Finding.NO_KERNEL_WORK, MATMULS),)),
    Reason.BACKWARD_DEFENCES_HELD: Defences((Defence(WORK, PASSED, Finding.ENOUGH_WORK, MATMULS),)),
    Reason.BACKWARD_DEFENCES_BROKEN: Defences(
        (Defence(WORK, FAILED, Finding.NO_KERNEL_WORK, MATMULS),)
    ),
    Reason.UNFIT_TILES: Unfit("check", MISFIT, DefenceOutcome.SCHEDULED),
    Reason.WITHIN_TOLERANCE: Agreement((RUN,)),
    Reason.NOT_JUDGED: NotJudged(("check",), Reason.TILES_NOT_RUN, Said("too large")),
    Reason.NO_EDGE_CONFIGS: NoFigures(),
    Reason.NO_TPU: NoFigures(),
    Reason.SPEEDUP_SIGNIFICANT: Timed(Ratio(2.0, 1.5, 2.5), True, Ratio(1, 0.9, 1.1)),
    Reason.SPEEDUP_NOT_SIGNIFICANT: Timed(Ratio(1.0, 0.9, 1.1), False, None, ON_DEVICE, "no trace"),
    Reason.WRONG_ON_DEVICE: DeviceNumerics(False, "bench", 1, CLOSE),
    Reason.EXPERT_COMPARED: ExpertComparison("estimated", "v5e", "expert.py", 1e-3, 2e-3, 2.0),
    Reason.CONFINED: Confinement(("landlock",), (), (), True),
    Reason.NO_SANDBOX_POLICY: Confinement((), (), (), False),
    Reason.SANDBOX_LAYERS_MISSING: Confinement((), (("seccomp", "off"),), ("seccomp",), False),
}
FIGURES |= {r: RUN for r in Reason if r.name.endswith(("OUTPUT", "RUN_FAILED", "DETECTED"))}
FIGURES |= {r: RUN for r in (Reason.KERNEL_FAILED, Reason.OUTSIDE_TOLERANCE, Reason.NON_FINITE)}
FIGURES |= {Reason.OUTPUT_MISMATCH: RUN}
FIGURES |= {r: TILES for r in Reason if r.name.startswith("TILES_") and r not in FIGURES}
FIGURES[Reason.TILES_REFERENCE_FAILED] = Said("over the CPU budget")


@pytest.mark.parametrize("reason", list(Reason))
def test_every_reason_has_words(reason: Reason) -> None:
    figures = FIGURES.get(reason, Said("what someone said"))
    words = check_words(reason, figures)  # type: ignore[arg-type]
    assert words and "None" not in words, (reason, words)


@pytest.mark.parametrize("reason", list(Reason))
def test_a_check_crosses_json_with_its_reason_and_figures(reason: Reason) -> None:
    figures = FIGURES.get(reason, Said("what someone said"))
    check = Check("numerics", FAIL, reason, figures, 1.5, production_shapes=True)  # type: ignore[arg-type]
    assert Check.from_json(check.to_json()) == check


def test_the_json_keeps_its_fields_and_adds_the_code() -> None:
    check = Check("numerics", PASS, Reason.WITHIN_TOLERANCE, Agreement((RUN,)))
    data = check.to_json()
    assert set(data) == {"name", "status", "detail", "seconds", "data", "reason"}
    assert data["reason"] == "within_tolerance"
    assert data["detail"].startswith("1 run(s) within tolerance; bench seed 1 max|Δ| 0.001 at")


def test_a_check_stored_before_reasons_keeps_its_words() -> None:
    old = {"name": "numerics", "status": "fail", "detail": "wrong", "seconds": 1.0, "data": {}}
    check = Check.from_json(old)
    assert (check.reason, check.figures, check.detail) == (
        Reason.WORDS_ONLY,
        Said("wrong"),
        "wrong",
    )
    at_production = dict(old, status="pass", data={"production_shapes": True})
    assert Check.from_json(at_production).production_shapes


def test_evidence_reads_the_tiles_figures() -> None:
    report = EvalReport("t", "k.py", ["v5e"], "cpu")
    report.add(Check("tiles", PASS, Reason.TILES_SAMPLED, TILES))
    unfit = Unfit("check", MISFIT, DefenceOutcome.SAMPLED)
    report.add(Check("numerics", SKIP, Reason.UNFIT_TILES, unfit))
    assert report.evidence == [
        "production tiles (pass): 2 of 16 output blocks, sample seed 7, inputs seed 0",
        "check: not run — the kernel's tiles (block 512 along axis 0 of output 0 of k) do not "
        "fit the derived check shapes (256); its numerics are judged at production tiles only",
    ]


def test_a_backward_check_is_told_from_the_forward_check_of_its_name():
    """An agent's log keys each check by its name: a training kernel's backward trace,
    defences and tiles stand beside the forward's and must not replace them."""
    forward_tiles = TilesFigures("bench", 0, 1, 2, 8)
    backward_tiles = TilesFigures("bench", 0, 1, 2, 8, gradients="x, w")
    assert not Check(CheckName.TILES, PASS, Reason.TILES_SAMPLED, forward_tiles).of_backward
    assert Check(CheckName.TILES, PASS, Reason.TILES_SAMPLED, backward_tiles).of_backward
    assert Check(CheckName.TRACE, PASS, Reason.BACKWARD_IN_PALLAS, NoFigures()).of_backward
    assert not Check(CheckName.TRACE, PASS, Reason.TRACE_REFUSED, Said("no")).of_backward
