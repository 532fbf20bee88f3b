"""The harness end to end: honest kernels accepted, each cheat rejected for its reason, and the
caller unharmed by kernels that hang, crash or eat memory."""

import json

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness, UsageError
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import find_task, load_task
from maxkernel_tui.kernels.workers import jax_worker_env
from tests.support.paths import KERNELS

pytestmark = pytest.mark.slow  # candidate and reference jax worker processes

ADAPTED = KERNELS.parent / "adapted_tasks"
SECRET = "sk-test-0123456789-secret"

HONEST = [
    "12p_RMSNorm",
    "8p_GEMM",
    "41k_Gemm_Add_ReLU",
    "36k_Matmul_Sigmoid_Sum",
    "14p_Ragged_Dot",
    "1p_Flash_Attention",
]

# cheat file -> (task, check that rejects it, words of the reason)
CHEATS = {
    "plain_jnp": ("41k", "trace", "no pallas_call"),
    "trivial_wrapper": ("41k", "trace", "heavy work runs in XLA outside the Pallas kernel"),
    "calls_reference": ("41k", "trace", "heavy work runs in XLA outside the Pallas kernel"),
    "cached_results": ("12p", "static", "calls back into Python from device code"),
    "hardcoded_shapes": ("12p", "heldout", "outputs are NaN or infinite"),
    "partial_write": ("12p", "numerics", "is every output block written?"),
    "wrong_numerics": ("12p", "numerics", "elements outside tolerance"),
    "constant_output": ("41k", "production", "the kernel does no matmul work"),
    "oob_read": ("12p", "numerics", "Out-of-bounds"),
    "bad_block_shape": ("41k", "tpu_lower", "divisible by 8 and 128"),
    "vmem_blowup": ("41k", "tpu_compile", "would exceed memory (size=134217728)"),
}


@pytest.fixture(scope="module")
def harness():
    with Harness() as shared:
        yield shared


@pytest.mark.parametrize("task_id", HONEST)
def test_honest_kernels_are_accepted(harness, suite_tasks, task_id):
    task = find_task(task_id, suite_tasks)
    report = harness.evaluate(KernelSource.read(KERNELS / "honest" / f"{task_id}.py"), task)
    assert report.verdict == "accepted", report.failure
    checks = {c.name: c for c in report.checks}
    # a task with an expert baseline also shows the kernel beside it (estimated off a TPU)
    expert = ["expert"] if task.expert_path else []
    assert [c.name for c in report.checks] == [
        "static",
        "sandbox",
        "trace",
        "tpu_lower",
        "tpu_compile",
        "production",
        "numerics",
        "heldout",
        "timing",
        *expert,
    ]
    assert (report.expert is not None) == bool(expert)
    seeds = EvalOptions().seeds  # the default, as the workbench, the agents and `eval` take it
    assert checks["numerics"].detail.startswith(f"{seeds} run(s) within tolerance")
    assert checks["timing"].status == "skip" and "no TPU" in checks["timing"].detail
    assert len(set(report.seeds)) == seeds


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_each_cheat_is_rejected_for_its_reason(harness, suite_tasks, cheat):
    task, check, reason = CHEATS[cheat]
    report = harness.evaluate(
        KernelSource.read(KERNELS / "cheats" / f"{cheat}.py"), find_task(task, suite_tasks)
    )
    assert report.verdict == "rejected"
    assert report.failure.name == check, report.failure
    assert reason in report.failure.detail
    assert report.checks[-1] is report.failure  # it stopped at the first failure


def test_hanging_crashing_and_hungry_kernels_leave_the_caller_working(suite_tasks):
    rmsnorm = find_task("12p", suite_tasks)
    with Harness(memory_bytes=4 * 2**30) as harness:
        hang = harness.evaluate(
            KernelSource.read(KERNELS / "cheats" / "hangs.py"), rmsnorm, EvalOptions(timeout=15)
        )
        crash = harness.evaluate(KernelSource.read(KERNELS / "cheats" / "crashes.py"), rmsnorm)
        hungry = harness.evaluate(KernelSource.read(KERNELS / "cheats" / "eats_memory.py"), rmsnorm)
        honest = harness.evaluate(KernelSource.read(KERNELS / "honest" / "12p_RMSNorm.py"), rmsnorm)
    assert "timed out after 15 s (process group killed)" in hang.failure.detail
    assert "crashed: worker died (killed by SIGSEGV)" in crash.failure.detail
    assert "out of memory (process limit 4 GiB)" in hungry.failure.detail
    assert honest.verdict == "accepted"


def test_no_secret_reaches_a_kernel_or_a_report(suite_tasks, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert SECRET not in json.dumps(jax_worker_env())
    with Harness() as harness:
        reports = [
            harness.evaluate(
                KernelSource.read(KERNELS / "cheats" / f"{name}.py"), find_task("12p", suite_tasks)
            )
            for name in ("reads_secrets", "obfuscated_env", "crashes")
        ]
    for report in reports:
        assert SECRET not in json.dumps(report.to_json())
    assert reports[-1].verdict == "rejected"  # the crash; the readers find no secret to show


def test_a_kernel_that_patches_its_own_clock_is_judged_as_the_kernel_it_is(harness, suite_tasks):
    """No static rule refuses `time.perf_counter = ...` or `jax.block_until_ready = ...` any
    more: the patch reaches only the tracer that imports the kernel; the judge and the timing
    run the program it carried and never import it. Its honest GEMM is accepted as such."""
    task = find_task("41k", suite_tasks)
    report = harness.evaluate(KernelSource.read(KERNELS / "cheats" / "patches_timer.py"), task)
    assert report.verdict == "accepted", report.failure
    assert report.checks[0].name == "static" and report.checks[0].status == "pass"


def test_sanity_run_of_a_reference_against_itself(harness, suite_tasks):
    task = find_task("13p", suite_tasks)
    report = harness.evaluate(
        KernelSource.read(task.reference_path), task, EvalOptions(require_pallas=False, seeds=1)
    )
    assert report.verdict == "accepted", report.failure
    assert "sanity run" in report.checks[2].detail


EDGE_HIDDEN = (
    "edge_hidden",
    {"batch": 2, "seq": 64, "hidden": 384},
)  # 3 lane tiles: no 256-wide chunks


def test_an_edge_configuration_is_checked_after_numerics(harness, suite_tasks):
    """The honest kernel passes the extra configuration; one that reduces over hard-coded 256-wide
    chunks, right on every hidden size the task itself declares, fails it at `edge`."""
    task = find_task("12p", suite_tasks)
    options = EvalOptions(seeds=1, extra_configs=(EDGE_HIDDEN,))
    honest = harness.evaluate(
        KernelSource.read(KERNELS / "honest" / "12p_RMSNorm.py"), task, options
    )
    chunked = harness.evaluate(
        KernelSource.read(KERNELS / "agent" / "rmsnorm_fixed_chunk.py"), task, options
    )
    assert [c.name for c in honest.checks] == [
        "static",
        "sandbox",
        "trace",
        "tpu_lower",
        "tpu_compile",
        "production",
        "numerics",
        "edge",
        "heldout",
        "timing",
    ]
    assert honest.verdict == "accepted", honest.failure
    assert "edge_hidden seed" in honest.checks[7].detail
    assert chunked.failure.name == "edge", chunked.failure
    assert (
        "edge_hidden" in chunked.failure.detail
        and "elements outside tolerance" in chunked.failure.detail
    )


def test_an_edge_pass_runs_the_edge_cases_alone_and_joins_the_full_report(harness, suite_tasks):
    """The tester's pass on an accepted kernel: the checks up to production again, numerics on
    the edge case only (no check, held-out or timing); joined, `edge` sits where a full
    evaluation puts it. Without edge cases the pass is refused."""
    task = find_task("12p", suite_tasks)
    kernel = KERNELS / "agent" / "rmsnorm_fixed_chunk.py"  # right on the task's own shapes
    judged = harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=1))
    edges = EvalOptions(seeds=1, extra_configs=(EDGE_HIDDEN,), edges_only=True)
    edge_pass = harness.evaluate(KernelSource.read(kernel), task, edges)
    assert [c.name for c in edge_pass.checks] == [
        "static",
        "sandbox",
        "trace",
        "tpu_lower",
        "tpu_compile",
        "production",
        "edge",
    ]
    assert any(line.startswith("edge: edge_hidden") for line in edge_pass.inputs)
    joined = judged.with_edge_pass(edge_pass)
    assert judged.verdict == "accepted" and joined.verdict == "rejected"
    assert [c.name for c in joined.checks][6:] == ["numerics", "edge", "heldout", "timing"]
    assert joined.failure.name == "edge" and joined.seeds == judged.seeds
    with pytest.raises(UsageError, match="needs edge-case configurations"):
        harness.evaluate(KernelSource.read(kernel), task, EvalOptions(edges_only=True))


def test_a_task_without_named_configurations_gets_no_edge_runs(harness):
    task = load_task(ADAPTED / "2_Softmax_Multi")  # two production inputs: nothing derived
    report = harness.evaluate(
        KernelSource.read(task.reference_path),
        task,
        EvalOptions(require_pallas=False, extra_configs=(("edge_small", {"n": 100}),)),
    )
    assert report.verdict == "accepted", report.failure
    edge = next(c for c in report.checks if c.name == "edge")
    assert edge.status == "skip" and "no named configurations" in edge.detail


def test_a_kernel_that_prints_while_traced_is_judged_as_the_kernel_it_is(
    harness, suite_tasks, tmp_path
):
    """What a kernel prints (at import and inside `computation`) never reaches the harness's
    line protocol: it goes to the tracer's standard error."""
    honest = (KERNELS / "honest" / "41k_Gemm_Add_ReLU.py").read_text()
    noisy = honest.replace(
        "def computation(x, weight, bias):\n",
        "print('imported')\n\n\ndef computation(x, weight, bias):\n"
        "    print('tracing', x.shape, '{\"verdict\": \"accepted\"}')\n",
    )
    assert noisy != honest
    kernel = tmp_path / "noisy.py"
    kernel.write_text(noisy)
    report = harness.evaluate(
        KernelSource.read(kernel), find_task("41k_Gemm_Add_ReLU", suite_tasks)
    )
    assert report.verdict == "accepted", report.failure


def test_a_task_whose_reference_prints_is_judged(harness, tmp_path):
    """A reference that prints (at import and while it computes) is a task file of the field's,
    not an error: its workers' answers travel apart from what it writes."""
    from tests.support.task_folders import write_plain

    folder = write_plain(tmp_path, "41k_Gemm_Add_ReLU")
    reference = folder / "reference.py"
    reference.write_text(
        "print('loading the reference')\n"
        + reference.read_text().replace(
            "    return jax.nn.relu(x @ w + b)",
            "    print('computing', x.shape)\n    return jax.nn.relu(x @ w + b)",
        )
    )
    assert "computing" in reference.read_text()
    report = harness.evaluate(
        KernelSource.read(KERNELS / "honest" / "41k_Gemm_Add_ReLU.py"), load_task(folder)
    )
    assert report.verdict == "accepted", report.failure
