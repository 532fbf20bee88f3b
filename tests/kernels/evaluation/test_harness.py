"""The harness end to end: honest kernels accepted, each cheat rejected for its reason, and the
caller unharmed by kernels that hang, crash or eat memory."""

import json

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness, UsageError
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import find_task, load_task
from maxkernel_tui.kernels.report.checks import Check
from maxkernel_tui.kernels.report.reasons import (
    Agreement,
    Defences,
    Finding,
    Problems,
    Reason,
    RunFigures,
    Said,
    StaticRule,
    Target,
    WorkerFailed,
)
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

# cheat file -> (task, check that rejects it, its reason, what the rule, the worker or the
# compiler said, in their words, where the reason carries them)
CHEATS = {
    "plain_jnp": ("41k", "trace", Reason.NO_PALLAS_CALL, ""),
    "trivial_wrapper": ("41k", "trace", Reason.HEAVY_WORK_OUTSIDE_PALLAS, ""),
    "calls_reference": ("41k", "trace", Reason.HEAVY_WORK_OUTSIDE_PALLAS, ""),
    "cached_results": ("12p", "static", Reason.STATIC_RULES_BROKEN, "calls back into Python"),
    "hardcoded_shapes": ("12p", "heldout", Reason.NON_FINITE, ""),
    "partial_write": ("12p", "numerics", Reason.NON_FINITE, ""),
    "wrong_numerics": ("12p", "numerics", Reason.OUTSIDE_TOLERANCE, ""),
    "constant_output": ("41k", "production", Reason.DEFENCES_BROKEN, ""),
    "oob_read": ("12p", "numerics", Reason.KERNEL_FAILED, "Out-of-bounds"),
    "bad_block_shape": ("41k", "tpu_lower", Reason.LOWERING_FAILED, "divisible by 8 and 128"),
    "vmem_blowup": ("41k", "tpu_compile", Reason.COMPILE_FAILED, "would exceed memory"),
}


def _their_words(check: Check) -> str:
    """What someone else said that a check's figures carry: a rule, a worker, a compiler."""
    match check.figures:
        case Said(text) | Target(_, text) | WorkerFailed(_, text):
            return text
        case Problems(problems):
            return "; ".join(p.text for p in problems)
        case RunFigures(error=error):
            return error or ""
    return ""


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
    numerics = checks["numerics"]
    assert numerics.reason == Reason.WITHIN_TOLERANCE and isinstance(numerics.figures, Agreement)
    assert len(numerics.figures.runs) == seeds
    assert checks["timing"].status == "skip" and checks["timing"].reason == Reason.NO_TPU
    assert len(set(report.seeds)) == seeds


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_each_cheat_is_rejected_for_its_reason(harness, suite_tasks, cheat):
    task, check, reason, said = CHEATS[cheat]
    report = harness.evaluate(
        KernelSource.read(KERNELS / "cheats" / f"{cheat}.py"), find_task(task, suite_tasks)
    )
    assert report.verdict == "rejected"
    assert (report.failure.name, report.failure.reason) == (check, reason), report.failure
    assert said in _their_words(report.failure), report.failure
    if reason == Reason.STATIC_RULES_BROKEN:
        assert StaticRule.HOST_CALLBACK in {p.rule for p in report.failure.figures.problems}
    if reason == Reason.DEFENCES_BROKEN:
        assert isinstance(report.failure.figures, Defences)
        found = {d.finding for d in report.failure.figures.defences}
        assert Finding.NO_KERNEL_WORK in found
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
    assert hang.failure.reason == Reason.WORKER_TIMED_OUT, hang.failure
    assert "timed out after 15 s (process group killed)" in _their_words(hang.failure)
    assert crash.failure.reason == Reason.WORKER_CRASHED, crash.failure
    assert "worker died (killed by SIGSEGV)" in _their_words(crash.failure)
    assert hungry.failure.reason == Reason.UNTRACEABLE, hungry.failure  # its MemoryError
    assert "out of memory (process limit 4 GiB)" in _their_words(hungry.failure)
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
    assert report.checks[2].reason == Reason.SANITY_RUN


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
    edge = honest.checks[7].figures
    assert isinstance(edge, Agreement) and [r.config for r in edge.runs] == ["edge_hidden"]
    assert chunked.failure.name == "edge", chunked.failure
    assert chunked.failure.reason == Reason.OUTSIDE_TOLERANCE
    assert isinstance(chunked.failure.figures, RunFigures)
    assert chunked.failure.figures.config == "edge_hidden"


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
    assert edge.status == "skip" and edge.reason == Reason.NO_EDGE_CONFIGS


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
