"""Every suite expert baseline (jax's own Pallas kernel with JAXBench's tuning) is accepted by the
full evaluation, on v6e: JAXBench tuned them there, and on v5e the 1p and 8p tilings exceed the
16 MiB default scoped VMEM (the README's expert section says so). Up to half a minute per expert
on two cores, so these are in the heavy tier (`-m "not heavy"` leaves them out). The
production-shape defences on the experts are covered more cheaply by test_production_kernels.py.
"""

from collections.abc import Iterator

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import find_task

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

TARGET = "v6e"
# One seed: check (seed 0 and 1) and heldout shapes still run; more seeds repeat the same kernel.
OPTIONS = EvalOptions(target=TARGET, seeds=1, timeout=1800)
# Proven in test_interpreter_limits.py: neither of jax 0.10.2's interpret modes can run the
# kernel's unconditional ref reshape (TPU mode) and masked int-indexed store (HLO mode); every
# check before numerics (static, trace, TPU lowering, v6e compile, production) must still pass.
INTERPRETER_CANNOT_RUN = {
    "7p": "jax 0.10.2's TPU interpret mode cannot read through the reshaped kv ref of "
    "ragged_paged_attention ('ReshapeTransform' object has no attribute 'indices')",
}


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    """One harness for all eight: its reference worker and warm pool are reused."""
    with Harness() as shared:
        yield shared


# 3p's (MLA: two projections and attention, 84 s of one CI worker) runs under `-m coverage`
@pytest.mark.parametrize(
    "task_id",
    ["1p", "2p", pytest.param("3p", marks=pytest.mark.coverage), "4p", "6p", "7p", "8p", "11p"],
)
def test_each_expert_baseline_is_accepted(suite_tasks, harness, task_id):
    task = find_task(task_id, suite_tasks)
    assert task.expert_path is not None
    report = harness.evaluate(KernelSource.read(task.expert_path), task, OPTIONS)
    failure = report.failure
    if task_id in INTERPRETER_CANNOT_RUN and failure and "ReshapeTransform" in failure.detail:
        # Only the proven interpreter limit excuses it, after every check before numerics passed.
        assert failure.name == "numerics", failure
        pytest.xfail(INTERPRETER_CANNOT_RUN[task_id])
    assert report.verdict == "accepted", failure
    assert report.expert is None  # the expert is not compared with itself
