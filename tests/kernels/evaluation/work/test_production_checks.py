"""The production-shape defences judge measured programs: pure data, no jax (milliseconds)."""

from maxkernel_tui.kernels.evaluation.work.production_checks import (
    WORK_SHARE_FLOOR,
    KernelWork,
    ProgramWork,
    Shapes,
    judge,
)
from maxkernel_tui.kernels.report.reasons import (
    Bodies,
    Coverage,
    Defences,
    Finding,
    MatmulWork,
    Reason,
)

DOT = "bfloat16 x bfloat16 -> float32"


def _kernel(
    flops,
    *,
    operations=("dot_general",),
    types=(DOT,),
    coverage=1.0,
    exact=True,
    conditional=0.0,
):
    return KernelWork("k", 8, flops, conditional, exact, list(operations), list(types), coverage)


def _shapes(config, flops, reference_flops, **kernel):
    return Shapes(config, ProgramWork([_kernel(flops, **kernel)], 0.0), reference_flops, 1 << 30)


CHECKED = _shapes("check", 1e6, 1e6, operations=("dot_general", "iota", "select_n"))


def _outcomes(findings):
    return {d.name: d.outcome for d in findings.defences}


def test_an_honest_kernel_passes_every_defence_that_applies_and_says_which():
    findings = judge(_shapes("bench", 1e9, 1e9), CHECKED, on_tpu=False)
    assert findings.failure is None
    assert _outcomes(findings) == {
        "work": "passed",
        "coverage": "passed",
        "bodies": "passed",  # dropping the ragged-block mask on even shapes is not a cheat
        "numerics": "not applicable",
    }
    check = findings.to_check(0.5)
    assert check.status == "pass" and check.reason == Reason.DEFENCES_HELD
    assert isinstance(check.figures, Defences)
    assert [(d.name, d.outcome) for d in check.figures.defences][-1] == (
        "numerics",
        "not applicable",
    )
    assert [d.name for d in check.figures.defences] == ["work", "coverage", "bodies", "numerics"]


def test_a_kernel_doing_less_work_than_the_reference_needs_at_production_is_rejected():
    findings = judge(_shapes("bench", 1e8, 1e9), CHECKED, on_tpu=False)
    assert findings.failure.name == "work"
    assert findings.to_check(0).reason == Reason.DEFENCES_BROKEN
    assert findings.failure.finding == Finding.TOO_LITTLE_WORK
    # exactly half of the work is not enough either (the last wave's rule let half pass)
    half = judge(_shapes("bench", 5e8, 1e9), CHECKED, on_tpu=False)
    assert half.failure.finding == Finding.TOO_LITTLE_WORK
    assert half.failure.figures == MatmulWork("bench", 5e8, 1e9, 0.0, WORK_SHARE_FLOOR)


def test_padding_is_not_a_deficit_even_when_it_inflates_the_check_shapes_more():
    """Fixed 512 tiles with zero padding: 2.67x the reference's flops at check, 1.00x at
    bench; the work is judged against the reference's need, not against the check ratio."""
    padded_check = _shapes("check", 2.67e6, 1e6)
    findings = judge(_shapes("bench", 1e9, 1e9), padded_check, on_tpu=False)
    assert findings.failure is None
    assert findings.defences[0].figures == MatmulWork("bench", 1e9, 1e9, 0.0, WORK_SHARE_FLOOR)


def test_work_under_a_branch_is_reported_as_conditional():
    findings = judge(_shapes("bench", 1e9, 1e9, conditional=1e9), CHECKED, on_tpu=False)
    (work,) = [d for d in findings.defences if d.name == "work"]
    assert work.outcome == "passed" and isinstance(work.figures, MatmulWork)
    assert work.figures.conditional == 1e9


def test_no_matmul_work_against_a_reference_that_has_matmuls_never_passes():
    none_at_all = judge(_shapes("bench", 0.0, 1e9, exact=False), CHECKED, on_tpu=False)
    assert none_at_all.failure.finding == Finding.NO_KERNEL_WORK
    # and "0 against 0" is not a pass either: it says the rule does not apply
    nothing_needed = judge(_shapes("bench", 0.0, 0.0), CHECKED, on_tpu=False)
    assert {d.name: d.outcome for d in nothing_needed.defences}["work"] == "not applicable"


def test_a_grid_that_leaves_part_of_the_output_unwritten_is_rejected():
    findings = judge(_shapes("bench", 1e9, 1e9, coverage=0.5), CHECKED, on_tpu=False)
    assert findings.failure.name == "coverage"
    assert findings.failure.finding == Finding.COVERAGE_SHRINKS
    assert findings.failure.figures == Coverage(0.5, 1.0)


def test_a_body_that_drops_arithmetic_or_changes_matmul_types_is_rejected():
    no_exp = judge(
        _shapes("bench", 1e9, 1e9),
        _shapes("check", 1e6, 1e6, operations=("dot_general", "exp")),
        on_tpu=False,
    )
    assert no_exp.failure.finding == Finding.OPERATIONS_DROPPED
    assert isinstance(no_exp.failure.figures, Bodies) and no_exp.failure.figures.dropped == ("exp",)
    fp8 = judge(
        _shapes("bench", 1e9, 1e9, types=("float8 x float8 -> float32",)), CHECKED, on_tpu=False
    )
    assert fp8.failure.name == "bodies" and fp8.failure.finding == Finding.MATMUL_TYPES_CHANGED


def test_data_dependent_work_is_not_judged_by_flops_and_says_so():
    findings = judge(_shapes("bench", 1e3, 1e9, exact=False, coverage=None), CHECKED, on_tpu=False)
    assert findings.failure is None
    assert _outcomes(findings)["work"] == "not applicable"
    assert _outcomes(findings)["coverage"] == "not applicable"


def test_production_numerics_are_sampled_by_tiles_when_too_large_to_run_in_full():
    findings = judge(_shapes("bench", 1e12, 1e12), CHECKED, on_tpu=False, tiles=True)
    assert _outcomes(findings)["numerics"] == "sampled"


def test_production_numerics_are_scheduled_when_affordable_or_on_a_tpu():
    small = Shapes("bench", ProgramWork([_kernel(1e8)], 0.0), 1e8, 1 << 20)
    assert _outcomes(judge(small, CHECKED, on_tpu=False))["numerics"] == "scheduled"
    assert _outcomes(judge(_shapes("bench", 1e12, 1e12), CHECKED, on_tpu=True))["numerics"] == (
        "scheduled"
    )
