"""Training kernels judged on their gradients: a jax.custom_vjp whose backward is Pallas is
accepted, a wrong gradient is rejected naming it, a backward in XLA (or none) is rejected naming
the backward; a plain folder gets gradient checks from the option alone."""

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.profiling.profile import profile_kernel
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.reasons import Agreement, Reason, RunFigures
from maxkernel_tui.services.tasks import with_gradient_option
from tests.support.maxkernel_dataset import write_jaxbench_tiled_gemm
from tests.support.paths import GRADIENT_TASKS, KERNELS

pytestmark = pytest.mark.slow  # candidate and reference jax worker processes

OURS = GRADIENT_TASKS / "rmsnorm_train"  # CONFIGS, yaml `gradients: [x, w]`, grad_atol
# MaxKernel's format, no `gradients` key; production shapes too large to run in full on a CPU
PLAIN = GRADIENT_TASKS / "matmul_plain"


@pytest.fixture(scope="module")
def harness():
    with Harness() as shared:
        yield shared


ONE_SEED = EvalOptions(seeds=1)


def _evaluate(harness, kernel, task, options=ONE_SEED):
    source = KernelSource.read(KERNELS / "gradients" / f"{kernel}.py")
    return harness.evaluate(source, task, options)


def _gradient_runs(report):
    return [
        run
        for check in report.checks
        if isinstance(check.figures, Agreement)
        for run in check.figures.runs
        if run.gradient is not None
    ]


def test_a_custom_vjp_with_a_pallas_backward_is_accepted_on_every_gradient(harness):
    report = _evaluate(harness, "rmsnorm_vjp", load_task(OURS))
    assert report.verdict == "accepted", report.failure
    compared = {(run.config, run.gradient) for run in _gradient_runs(report)}
    assert {("check", "x"), ("check", "w"), ("heldout", "x"), ("heldout", "w")} <= compared
    # the yaml's gradient tolerance, not the forward's
    assert {(run.atol, run.rtol) for run in _gradient_runs(report)} == {(2e-4, 2e-4)}
    backward = [c for c in report.checks if c.reason == Reason.BACKWARD_IN_PALLAS]
    assert len(backward) == 1 and "gradients of x, w" in backward[0].detail
    # the production defences hold for the backward program too
    assert [c.status for c in report.checks if c.reason == Reason.BACKWARD_DEFENCES_HELD] == [
        "pass"
    ]
    assert any(
        line.startswith("gradients of x, w: compared") and "at production shapes too" in line
        for line in report.evidence
    )


def test_a_wrong_gradient_with_a_right_forward_is_rejected_naming_the_gradient(harness):
    report = _evaluate(harness, "rmsnorm_wrong_dx", load_task(OURS))
    failure = report.failure
    assert failure is not None and failure.reason == Reason.GRADIENT_OUTSIDE_TOLERANCE
    assert isinstance(failure.figures, RunFigures) and failure.figures.gradient == "x"
    assert "gradient of x" in failure.detail and "elements outside tolerance" in failure.detail
    assert report.checks[-1] is failure  # the forward outputs agreed: no other check failed


def test_a_plain_folder_is_judged_on_gradients_from_the_option_alone(harness):
    task = with_gradient_option(load_task(PLAIN), "x,w")
    report = _evaluate(harness, "matmul_vjp", task, EvalOptions(seeds=1, tile_blocks=4))
    assert report.verdict == "accepted", report.failure
    assert {run.gradient for run in _gradient_runs(report)} == {"x", "w"}
    # production shapes too large to run in full here: the backward's kernels are sampled
    backward = [c for c in report.checks if c.name == "tiles" and c.figures.gradients]
    assert [(c.status, c.figures.gradients) for c in backward] == [("pass", "x, w")], [
        (c.name, c.detail) for c in report.checks
    ]
    assert "backward (gradients of x, w)" in backward[0].detail
    assert any(
        "gradients of x, w verified at production shapes on sampled tiles" in line
        for line in report.evidence
    )


@pytest.mark.parametrize(
    ("kernel", "reason", "words"),
    [
        ("matmul_xla_bwd", Reason.BACKWARD_WORK_OUTSIDE_PALLAS, "the backward"),
        ("matmul_no_vjp", Reason.BACKWARD_UNTRACEABLE, "custom_vjp"),
    ],
)
def test_a_backward_outside_pallas_is_rejected_naming_the_backward(harness, kernel, reason, words):
    report = _evaluate(harness, kernel, with_gradient_option(load_task(PLAIN), "x,w"))
    failure = report.failure
    assert failure is not None and failure.name == "trace" and failure.reason == reason
    assert words in failure.detail


def test_without_gradients_the_same_folder_is_judged_forward_only(harness):
    report = _evaluate(harness, "matmul_no_vjp", load_task(PLAIN))
    assert report.verdict == "accepted", report.failure
    assert not _gradient_runs(report)
    assert not any(c.reason == Reason.BACKWARD_IN_PALLAS for c in report.checks)


def test_all_names_every_floating_point_array_input():
    """`--gradients all` on a folder: x and w, not the static epsilon (from the sandboxed
    describe worker's input types)."""
    assert with_gradient_option(load_task(OURS), "all").gradients == ("x", "w")


def test_a_training_kernels_profile_covers_its_backward_against_xlas_vjp(tmp_path):
    """The model's figures of the backward program (forward and both gradient kernels) against
    XLA's jax.vjp of the reference, labelled so."""
    task = with_gradient_option(load_task(PLAIN), "x,w")
    kernel = KernelSource.read(KERNELS / "gradients" / "matmul_vjp.py")
    summary = profile_kernel(kernel, task, targets=("v5e",), trace_root=tmp_path, trace=False)
    assert summary.gradients == ["x", "w"] and len(summary.kernels) == 3
    assert "forward and backward" in summary.to_text()
    line = summary.against_xla("v5e")
    assert "against XLA's jax.vjp of the reference" in line and "not measured" in line
    forward = profile_kernel(
        kernel, load_task(PLAIN), targets=("v5e",), trace_root=tmp_path, trace=False
    )
    # XLA's gradient costs about three matmuls where its forward costs one (beyond dispatch)
    xla = [
        s.estimates[0].reference_seconds - s.estimates[0].dispatch_seconds
        for s in (summary, forward)
    ]
    assert xla[0] > 2 * xla[1], xla


def test_a_jaxbench_folder_gets_gradient_checks_from_all_alone(harness, tmp_path):
    """The least convenient plain folder: JAXBench's native layout (baseline.py with a
    `workload(A, B)`, sizes in a CONFIG dict, bf16, no yaml and no configurations), read as it
    is; `all` finds its two inputs, and a custom_vjp kernel written with other parameter names
    is judged on both gradients."""
    folder = write_jaxbench_tiled_gemm(tmp_path, (256, 512, 384), (128, 128, 128))
    before = {path.name: path.read_text() for path in folder.iterdir()}
    task = with_gradient_option(load_task(folder), "all")
    assert task.gradients == ("A", "B")
    report = _evaluate(harness, "matmul_vjp", task)
    assert report.verdict == "accepted", report.failure
    assert {run.gradient for run in _gradient_runs(report)} == {"A", "B"}
    assert any(c.reason == Reason.BACKWARD_IN_PALLAS for c in report.checks)
    # the folder is read, never written
    assert {path.name: path.read_text() for path in folder.iterdir()} == before
