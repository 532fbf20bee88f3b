"""JAXBench's own experts, in their style, on JAXBench-native folders: jax's idioms (a frozen
dataclass setting its fields in `__post_init__` with `object.__setattr__`, `jax.sharding`
partition specs) pass the static rules and the expert is accepted; an expert whose outputs are
float32 where the baseline's are bfloat16 (JAXBench's MLA expert) is compared by value as
JAXBench's harness compares, and the trace check says so; the same widening on a task of our
own (MaxKernel's plain format) is still refused for its types."""

from collections.abc import Iterator

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.report.checks import Check
from maxkernel_tui.kernels.report.reasons import OutsidePallas, Reason, Said, WorkShare
from tests.support import jaxbench_experts

pytestmark = pytest.mark.slow  # candidate and reference jax worker processes

OPTIONS = EvalOptions(seeds=1, timeout=600)
ADAPTED = "compared by value, as JAXBench's harness compares (both cast to float32, then allclose)"


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with Harness() as shared:
        yield shared


def _outputs(trace: Check) -> str:
    """A passed trace check's outputs and how they are compared, as its figures carry them."""
    assert isinstance(trace.figures, WorkShare | OutsidePallas), trace
    return trace.figures.outputs


def test_an_expert_in_jaxs_own_style_is_accepted(harness, tmp_path):
    task = load_task(jaxbench_experts.write_task(tmp_path))
    assert task.expert_path is not None
    report = harness.evaluate(KernelSource.read(task.expert_path), task, OPTIONS)
    assert report.verdict == "accepted", report.failure
    checks = {c.name: c for c in report.checks}
    assert checks["static"].status == "pass"
    assert ADAPTED not in _outputs(checks["trace"])  # its types are the baseline's


def test_an_expert_that_widens_its_outputs_is_compared_as_jaxbench_compares(harness, tmp_path):
    task = load_task(jaxbench_experts.write_task(tmp_path, out_dtype="jnp.float32"))
    assert task.expert_path is not None
    report = harness.evaluate(KernelSource.read(task.expert_path), task, OPTIONS)
    assert report.verdict == "accepted", report.failure
    trace = next(c for c in report.checks if c.name == "trace")
    assert f"outputs float32 where the baseline's are bfloat16: {ADAPTED}" in _outputs(trace)


def test_the_same_widening_on_a_task_of_our_own_is_refused(harness, tmp_path):
    task = load_task(jaxbench_experts.write_plain_task(tmp_path / "tasks"))
    kernel = tmp_path / "widened.py"
    kernel.write_text(jaxbench_experts.plain_candidate(out_dtype="jnp.float32"))
    report = harness.evaluate(KernelSource.read(kernel), task, OPTIONS)
    assert report.verdict == "rejected"
    assert report.failure is not None and report.failure.name == "trace", report.checks
    refusal = report.failure.figures
    assert report.failure.reason == Reason.TRACE_REFUSED and isinstance(refusal, Said)
    assert "outputs differ from the reference's at production shapes" in refusal.text
    assert "float32[256, 256] instead of bfloat16[256, 256]" in refusal.text


def test_the_plain_candidate_with_the_references_types_is_accepted(harness, tmp_path):
    """The refusal above is for the types alone: the same kernel keeping bfloat16 passes."""
    task = load_task(jaxbench_experts.write_plain_task(tmp_path / "tasks"))
    kernel = tmp_path / "kept.py"
    kernel.write_text(jaxbench_experts.plain_candidate())
    report = harness.evaluate(KernelSource.read(kernel), task, OPTIONS)
    assert report.verdict == "accepted", report.failure


def test_an_expert_taking_fewer_arrays_than_the_baseline_gives_is_refused_saying_why(
    harness, tmp_path
):
    """JAXBench's paged-attention expert takes five arrays (another page layout, from its own
    create_inputs) where the baseline gives six; JAXBench's harness calls
    `optimized.workload(*baseline.create_inputs())` and fails it the same way. Here: one of two."""
    task = load_task(jaxbench_experts.write_task(tmp_path))
    assert task.expert_path is not None
    source = task.expert_path.read_text().replace(
        "def workload(x, w):", "def workload(x):\n    w = x.T"
    )
    task.expert_path.write_text(source)
    report = harness.evaluate(KernelSource.read(task.expert_path), task, OPTIONS)
    assert report.verdict == "rejected"
    assert report.failure is not None and report.failure.name == "trace", report.checks
    assert report.failure.reason == Reason.UNTRACEABLE
    assert report.failure.figures == Said(
        "signature mismatch: the kernel's workload(x) cannot take 2 array argument(s) and 0 "
        "static argument(s) from baseline.create_inputs() (too many positional arguments); "
        "JAXBench's own harness calls workload(*baseline.create_inputs()) and fails it the same way"
    )
