"""Which derived configurations cannot run a kernel's own tiling, judged from its measured
programs (no jax, milliseconds), and the verdict where nothing else compared its outputs."""

from dataclasses import replace

from maxkernel_tui.kernels.evaluation.tiles.verdict import unjudged
from maxkernel_tui.kernels.evaluation.work.production_checks import (
    KernelWork,
    ProgramWork,
    mapped_misfit,
    tiles_misfit,
)
from maxkernel_tui.kernels.report.checks import (
    FAIL,
    PASS,
    SKIP,
    TILES,
    Check,
    EvalReport,
)
from maxkernel_tui.kernels.report.reasons import (
    Agreement,
    DefenceOutcome,
    Misfit,
    NotJudged,
    Reason,
    Said,
    Unfit,
    WorkShare,
)
from maxkernel_tui.kernels.report.words import check_words

DOT = "bfloat16 x bfloat16 -> float32"
MISFIT = Misfit("matmul_kernel", 0, 0, 8192, 2048)  # an 8192-row block where 2048 rows are
SAMPLED, NOT_APPLICABLE = DefenceOutcome.SAMPLED, DefenceOutcome.NOT_APPLICABLE


def _program(coverage, block, array):
    kernel = KernelWork(
        "matmul_kernel", 8, 1e9, 0.0, True, ["dot_general"], [DOT], coverage, ((block, array),)
    )
    return ProgramWork([kernel], 0.0)


PRODUCTION = _program(1.0, (8192, 128), (8192, 8192))


def test_a_block_above_a_derived_size_whose_grid_writes_nothing_is_a_misfit():
    zero_grid = _program(0.0, (8192, 128), (2048, 2048))
    assert tiles_misfit(PRODUCTION, zero_grid) == MISFIT
    # a block that does not divide its axis and leaves the last rows unwritten
    ragged = _program(0.75, (384, 128), (1536 + 64, 2048))
    assert tiles_misfit(PRODUCTION, ragged) == Misfit("matmul_kernel", 0, 0, 384, 1600)


def test_a_program_that_covers_its_outputs_or_whose_blocks_fit_is_judged_by_numerics():
    # the kernel shrank its blocks to the derived size (min(block, m)): it runs there
    assert tiles_misfit(PRODUCTION, _program(1.0, (2048, 128), (2048, 2048))) is None
    # blocks that divide but a grid that misses rows: the kernel's own fault, for numerics
    assert tiles_misfit(PRODUCTION, _program(0.5, (512, 128), (2048, 2048))) is None
    # production itself leaves part unwritten: nothing to excuse at the derived shapes
    partial = _program(0.5, (8192, 128), (8192, 8192))
    assert tiles_misfit(partial, _program(0.0, (8192, 128), (2048, 2048))) is None
    # coverage unknown (outputs written by DMA): no claim either way
    assert tiles_misfit(PRODUCTION, _program(None, (8192, 128), (2048, 2048))) is None


def test_without_a_derived_program_the_production_blocks_are_taken_to_the_derived_sizes():
    """The kernel refused to be traced at check (a tiling that checks its divisibility): the
    production program's 8192-row block against the 2048 rows the derivation makes of 8192."""
    assert mapped_misfit(PRODUCTION, {8192: 2048, 256: 256}) == MISFIT
    assert mapped_misfit(PRODUCTION, {8192: 8192}) is None  # a size kept: it fits
    assert mapped_misfit(PRODUCTION, {}) is None  # moved to several sizes: unknown
    half = _program(0.5, (8192, 128), (8192, 8192))  # production leaves memory unwritten
    assert mapped_misfit(half, {8192: 2048}) is None


def test_the_skipped_check_says_where_the_numerics_are_judged_instead():
    """Its words (report/words.py), made from the misfit and the numerics defence's outcome."""
    sampled = check_words(Reason.UNFIT_TILES, Unfit("check", MISFIT, SAMPLED))
    assert sampled == (
        "check: not run — the kernel's tiles (block 8192 along axis 0 of output 0 of "
        "matmul_kernel) do not fit the derived check shapes (2048); its numerics are judged at "
        "production tiles only"
    )
    refused = Unfit("check", replace(MISFIT, untraced="8192 does not divide 2048"), SAMPLED)
    assert "(2048), and the kernel refused to be traced there: 8192 does not divide 2048; " in (
        check_words(Reason.UNFIT_TILES, refused)
    )
    alone = check_words(Reason.UNFIT_TILES, Unfit("check", MISFIT, NOT_APPLICABLE))
    assert alone.endswith("production shapes do not run here either")
    joined = check_words(Reason.UNFIT_TILES, Unfit("edge_odd", MISFIT, NOT_APPLICABLE, True))
    assert joined.endswith("judged at production shapes by the full evaluation")


def _report(*checks):
    return EvalReport("t", "k.py", ["v5e"], "cpu", checks=list(checks))


UNFIT = Check("numerics", SKIP, Reason.UNFIT_TILES, Unfit("check", MISFIT, NOT_APPLICABLE))
PASSED = Check(
    "any", PASS, Reason.WITHIN_TOLERANCE, Agreement(())
)  # its name is what the tests vary


def test_a_kernel_judged_nowhere_is_rejected_as_not_judged_and_one_judged_somewhere_is_not():
    skipped_tiles = Check(TILES, SKIP, Reason.TILES_NOT_RUN, Said("too large"))
    found = unjudged(_report(UNFIT, skipped_tiles))
    assert found is not None and found.status == FAIL and found.reason == Reason.NOT_JUDGED
    assert found.figures == NotJudged(("check",), Reason.TILES_NOT_RUN, Said("too large"))
    assert found.detail.startswith("not judged: ")  # the words, once: a rejection's reason
    assert "nowhere here (production tiles not run: too large)" in found.detail
    off = unjudged(_report(UNFIT))
    assert off is not None and off.figures == NotJudged(("check",))
    assert "nowhere here (no production tiles were asked for)" in off.detail
    assert unjudged(_report(UNFIT)) is not None  # tiles off
    assert unjudged(_report(UNFIT, replace(PASSED, name=TILES))) is None
    assert unjudged(_report(UNFIT, replace(PASSED, name="heldout"))) is None
    assert unjudged(_report(skipped_tiles)) is None  # every configuration fit: as before


def test_evidence_names_the_unfit_configuration_and_keeps_notes_as_notes():
    traced = Check("trace", PASS, Reason.PALLAS_HOLDS_THE_WORK, WorkShare(1, 0.0, 0.0, ""))
    report = _report(traced, UNFIT, replace(PASSED, name=TILES))
    report.inputs = ["trace: production shapes", "note: sizes derived from production"]
    assert report.evidence[:3] == [
        "trace: production shapes",
        "note: sizes derived from production",
        "check: not run — the kernel's tiles (block 8192 along axis 0 of output 0 of "
        "matmul_kernel) do not fit the derived check shapes (2048); its production shapes do "
        "not run here either",
    ]
