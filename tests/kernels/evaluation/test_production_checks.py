"""The production-shape defences judge measured programs: pure data, no jax (milliseconds)."""

from maxkernel_tui.kernels.evaluation.production_checks import (
    KernelWork,
    ProgramWork,
    Shapes,
    judge,
)

DOT = "bfloat16 x bfloat16 -> float32"


def _kernel(flops, *, operations=("dot_general",), types=(DOT,), coverage=1.0, exact=True):
    return KernelWork("k", 8, flops, exact, list(operations), list(types), coverage)


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
    assert check.status == "pass" and "numerics: not applicable" in check.detail
    assert [d["name"] for d in check.data["defences"]] == ["work", "coverage", "bodies", "numerics"]


def test_a_kernel_doing_much_less_work_only_at_production_is_rejected():
    findings = judge(_shapes("bench", 1e8, 1e9), CHECKED, on_tpu=False)
    assert findings.failure.name == "work"
    assert "materially less work" in findings.to_check(0).detail


def test_a_grid_that_leaves_part_of_the_output_unwritten_is_rejected():
    findings = judge(_shapes("bench", 1e9, 1e9, coverage=0.5), CHECKED, on_tpu=False)
    assert findings.failure.name == "coverage"
    assert "stale memory" in findings.failure.detail and "50.0%" in findings.failure.detail


def test_a_body_that_drops_arithmetic_or_changes_matmul_types_is_rejected():
    no_exp = judge(
        _shapes("bench", 1e9, 1e9),
        _shapes("check", 1e6, 1e6, operations=("dot_general", "exp")),
        on_tpu=False,
    )
    assert no_exp.failure.name == "bodies" and "exp" in no_exp.failure.detail
    fp8 = judge(
        _shapes("bench", 1e9, 1e9, types=("float8 x float8 -> float32",)), CHECKED, on_tpu=False
    )
    assert fp8.failure.name == "bodies" and "operand types" in fp8.failure.detail


def test_data_dependent_work_is_not_judged_by_flops_and_says_so():
    findings = judge(_shapes("bench", 1e3, 1e9, exact=False, coverage=None), CHECKED, on_tpu=False)
    assert findings.failure is None
    assert _outcomes(findings)["work"] == "not applicable"
    assert _outcomes(findings)["coverage"] == "not applicable"


def test_production_numerics_are_scheduled_when_affordable_or_on_a_tpu():
    small = Shapes("bench", ProgramWork([_kernel(1e8)], 0.0), 1e8, 1 << 20)
    assert _outcomes(judge(small, CHECKED, on_tpu=False))["numerics"] == "scheduled"
    assert _outcomes(judge(_shapes("bench", 1e12, 1e12), CHECKED, on_tpu=True))["numerics"] == (
        "scheduled"
    )
