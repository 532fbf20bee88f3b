"""Plain and JAXBench tasks through the real workers: derived configurations validate, the
harness judges a plain task on fresh seeds and held-out shapes, JAXBench's expert file passes as
it is, and `profile` never interprets production shapes on a CPU."""

import pytest

from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.profiling.profile import profile_kernel
from maxkernel_tui.kernels.evaluation.profiling.worker import NO_CPU_TRACE
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.loader import load_task, load_tasks
from maxkernel_tui.kernels.report.checks import ACCEPTED, FAIL, REJECTED
from maxkernel_tui.kernels.report.reasons import Reason, RunFigures
from tests.support.plain_kernels import HARD_CODED_GEMM, HONEST_GEMM
from tests.support.task_folders import PLAIN, move_inputs_to_yaml, write_jaxbench, write_plain

# jax worker processes and TPU compiles: about a minute in all
pytestmark = pytest.mark.slow


def test_every_family_validates_its_derived_configurations_in_a_worker(tmp_path):
    for task_id in PLAIN:
        write_plain(tmp_path / "tasks", task_id)
    write_jaxbench(tmp_path / "tasks")
    tasks, errors = load_tasks(tmp_path / "tasks")
    assert errors == [] and len(tasks) == len(PLAIN) + 1
    described = describe_tasks(tasks, tmp_path / "cache", with_cost=False, workers=2)
    for task in tasks:
        description = described[task.task_id]
        assert description.error is None, description.error
        assert list(description.configs) == ["bench", CHECK, HELDOUT]
        timed = description.configs[CHECK]  # run; heldout is traced (its shapes are known)
        assert timed.reference_seconds is not None and timed.inputs_seconds is not None
        assert description.configs[HELDOUT].reference_seconds is None
        assert description.configs[CHECK].inputs != description.configs["bench"].inputs
    assert described["8p_GEMM_Bias"].declared_flops == 2 * 1024 * 4096 * 2048
    paged = described["6p_Paged_Gather"].configs[CHECK]
    assert paged.inputs[1].shape == [128, 16, 128] and paged.static == [2048]


def test_the_harness_judges_a_plain_task_on_fresh_seeds_and_held_out_shapes(tmp_path):
    task = load_task(write_plain(tmp_path, "41k_Gemm_Add_ReLU"))
    honest, hard_coded = tmp_path / "honest.py", tmp_path / "hard_coded.py"
    honest.write_text(HONEST_GEMM)
    hard_coded.write_text(HARD_CODED_GEMM)
    jaxbench = load_task(write_jaxbench(tmp_path / "jaxbench"))
    with Harness() as harness:
        accepted = harness.evaluate(KernelSource.read(honest), task, EvalOptions(seeds=2))
        rejected = harness.evaluate(KernelSource.read(hard_coded), task, EvalOptions(seeds=1))
        on_heldout = harness.evaluate(
            KernelSource.read(hard_coded), task, EvalOptions(config=HELDOUT)
        )
        expert = harness.evaluate(
            KernelSource.read(jaxbench.expert_path), jaxbench, EvalOptions(seeds=1)
        )
    assert accepted.verdict == ACCEPTED, accepted.failure
    assert len(accepted.seeds) == 2
    assert any("numerics: check, derived: batch_size=512" in line for line in accepted.inputs)
    assert any("on 2 fresh seed(s)" in line for line in accepted.inputs)
    assert any(line.startswith("heldout: heldout, derived") for line in accepted.inputs)
    assert rejected.verdict == REJECTED and rejected.failure.name == "numerics"
    assert on_heldout.verdict == REJECTED and on_heldout.failure.name == "heldout"
    assert expert.verdict == ACCEPTED, expert.failure
    assert [c.name for c in expert.checks if c.status == FAIL] == []


def test_a_kernel_that_cannot_be_traced_at_check_shapes_is_judged_there_whatever_was_asked(
    tmp_path,
):
    # traced at production (depth 512) and held-out (1536) shapes, never at check's 1024: the
    # production defences cannot compare it, so a run at check shapes judges it even when only
    # held-out shapes were asked for
    task = load_task(write_plain(tmp_path, "41k_Gemm_Add_ReLU"))
    refusing = tmp_path / "refusing.py"
    refusing.write_text(
        HONEST_GEMM.replace(
            "    n = w.shape[1]\n",
            "    n = w.shape[1]\n"
            "    if depth == 1024:\n"
            "        raise ValueError('not at depth 1024')\n",
        )
    )
    with Harness() as harness:
        full = harness.evaluate(KernelSource.read(refusing), task, EvalOptions(seeds=1))
        on_heldout = harness.evaluate(
            KernelSource.read(refusing), task, EvalOptions(config=HELDOUT)
        )
    for report in (full, on_heldout):
        assert report.verdict == REJECTED
        failure = report.failure
        assert failure.name == "numerics" and failure.reason == Reason.KERNEL_FAILED, failure
        assert isinstance(failure.figures, RunFigures) and "not at depth 1024" in str(
            failure.figures.error
        )
        production = next(c for c in report.checks if c.name == "production")
        assert production.reason == Reason.NO_PROGRAM_AT_CHECK
        assert "no program at check shapes" in production.detail  # the words, once
    assert [c.name for c in on_heldout.checks if c.name == "heldout"] == ["heldout"]


def test_profile_skips_the_host_trace_of_a_task_without_check_shapes(tmp_path):
    folder = write_plain(tmp_path, "41k_Gemm_Add_ReLU")
    move_inputs_to_yaml(folder)
    task = load_task(folder)
    kernel = tmp_path / "k.py"
    kernel.write_text(HONEST_GEMM)
    summary = profile_kernel(
        KernelSource.read(kernel), task, targets=("v5e",), trace_root=tmp_path / "traces"
    )
    assert summary.trace is not None and summary.trace.kind == NO_CPU_TRACE
    assert "trace: skipped" in summary.to_text()
