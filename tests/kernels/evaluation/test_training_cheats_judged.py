"""The rejectable training candidates of tests/support/training_kernels.py through the judge, on
the built-in training tasks: causal flash attention whose dk/dv kernel drops a term of dS
(forward, dq and dv right) is rejected naming the gradient of key; an RMSNorm whose backward is
jnp around its Pallas forward (right gradients) is rejected for the backward's work in XLA."""

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import builtin_training_dir, find_task, load_tasks
from maxkernel_tui.kernels.report.reasons import Reason, RunFigures
from tests.support.training_kernels import wrong_dk_source, xla_backward_source

pytestmark = pytest.mark.slow  # candidate and reference jax worker processes

# no production tiles: both are rejected before them, and the verdicts must not wait on them
ONE_SEED = EvalOptions(seeds=1, tile_blocks=None)


@pytest.fixture(scope="module")
def harness():
    with Harness() as shared:
        yield shared


def _task(task_id):
    return find_task(task_id, load_tasks(builtin_training_dir())[0])


def test_a_dropped_term_in_dk_is_rejected_naming_the_gradient_of_key(harness):
    report = harness.evaluate(
        KernelSource(wrong_dk_source(), "flash_wrong_dk.py"), _task("4t"), ONE_SEED
    )
    failure = report.failure
    assert failure is not None and failure.reason == Reason.GRADIENT_OUTSIDE_TOLERANCE, [
        c.detail for c in report.checks
    ]
    assert isinstance(failure.figures, RunFigures) and failure.figures.gradient == "key"
    assert "gradient of key" in failure.detail
    # the forward outputs and the trace of both directions passed: only the gradient failed
    assert [c for c in report.checks if c.status == "fail"] == [failure]


def test_a_backward_in_xla_around_a_pallas_forward_is_rejected(harness):
    report = harness.evaluate(
        KernelSource(xla_backward_source(), "rmsnorm_xla_bwd.py"), _task("1t"), ONE_SEED
    )
    failure = report.failure
    assert failure is not None and failure.name == "trace", [c.detail for c in report.checks]
    assert failure.reason in (
        Reason.BACKWARD_WORK_OUTSIDE_PALLAS,
        Reason.BACKWARD_NO_PALLAS_CALL,
    ), failure.detail
    assert "backward" in failure.detail
    # the forward's own trace passed: the rejection is the backward's
    assert any(c.name == "trace" and c.status == "pass" for c in report.checks)
