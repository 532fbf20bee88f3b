"""The judge never runs in the process that imported the candidate: kernels that lie through
their tracer (forged checks, programs planted elsewhere, links, pickled code, a replaced dumper)
and one that replaces the judge's checks in its own process are all rejected, for the reason
the split gives. The static rules are switched off, so the split alone is tested."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.profiling import profile as profile_module
from maxkernel_tui.kernels.evaluation.profiling.profile import profile_kernel
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.report.checks import Check, EvalReport
from maxkernel_tui.kernels.report.reasons import At, Reason, Said, TracerClaim, Unbelievable
from maxkernel_tui.kernels.task import Task
from tests.support import hostile_kernels as hostile
from tests.support import lying_tracers as lying

pytestmark = pytest.mark.slow  # tracer, judge and reference jax worker processes

QUICK = EvalOptions(seeds=1, timeout=120, tile_blocks=None)


def _rejected_at_trace(harness: Harness, source: str, task: Task, tmp_path: Path) -> Check:
    kernel = tmp_path / "lying.py"
    kernel.write_text(source)
    report: EvalReport = harness.evaluate(KernelSource.read(kernel), task, QUICK)
    assert report.verdict == "rejected", report.checks
    assert report.failure is not None and report.failure.name == "trace", report.checks
    assert {c.name for c in report.checks if c.status == "pass"} <= {"static", "sandbox"}
    return report.failure


def test_checks_the_tracer_claims_are_not_believed(harness, task, tmp_path):
    failure = _rejected_at_trace(harness, lying.FORGED_PASSES, task, tmp_path)
    assert failure.reason == Reason.TRACER_UNBELIEVABLE
    assert failure.figures == Unbelievable(TracerClaim.JUDGES_CHECK, "trace", "pass")


def test_a_program_file_outside_the_tracers_directory_is_not_read(harness, task, tmp_path):
    target = task.folder / "reference.py"
    source = hostile.fill(lying.FILE_ELSEWHERE, target=str(target))
    failure = _rejected_at_trace(harness, source, task, tmp_path)
    assert failure.reason == Reason.PROGRAM_REFUSED and isinstance(failure.figures, At)
    assert "is not in the tracer's directory" in failure.figures.text


def test_a_link_planted_as_the_program_is_not_followed(harness, task, tmp_path):
    source = hostile.fill(lying.LINKED_PROGRAM, target=str(task.folder / "reference.py"))
    failure = _rejected_at_trace(harness, source, task, tmp_path)
    assert failure.reason == Reason.PROGRAM_REFUSED and isinstance(failure.figures, At)
    assert failure.figures.config == "bench" and "program-0.bin" in failure.figures.text


def test_pickled_code_sent_as_the_program_is_refused_unrun(harness, task, tmp_path):
    marker = tmp_path / "gadget-ran"
    source = hostile.fill(lying.PICKLED_GADGET, marker=str(marker))
    failure = _rejected_at_trace(harness, source, task, tmp_path)
    assert failure.reason == Reason.TRACE_REFUSED and isinstance(failure.figures, Said)
    assert "its program at production shapes is refused" in failure.figures.text
    assert "system" in failure.figures.text
    assert not marker.exists()


def test_a_program_traced_at_other_shapes_is_refused(harness, task, tmp_path):
    failure = _rejected_at_trace(harness, lying.SWAPPED_PROGRAM, task, tmp_path)
    assert failure.reason == Reason.TRACE_REFUSED and isinstance(failure.figures, Said)
    assert "takes float32[8, 128], not the task's inputs float32[16, 128]" in failure.figures.text


def test_a_kernel_cannot_replace_the_checks_that_judge_it(harness, task, tmp_path):
    """Plain jnp, no pallas_call, whose module replaces the trace and production checks in the
    process that imports it: that process only traces, so the judge's checks reject it."""
    failure = _rejected_at_trace(harness, hostile.fill(hostile.FORGE_THE_JUDGE), task, tmp_path)
    assert failure.reason == Reason.NO_PALLAS_CALL


def test_a_kernel_cannot_write_its_own_profile(task, tmp_path, monkeypatch):
    """The profile analyses and runs the programs the tracer carried: a module that replaces
    the profile's analysis in the process that imports it changes nothing the profile says."""
    monkeypatch.setattr(profile_module, "static_problems", lambda *args, **kwargs: [])
    honest, forging = tmp_path / "honest.py", tmp_path / "forging.py"
    honest.write_text(hostile.HONEST_BODY + "\n\ndef computation(x):\n    return _honest(x)\n")
    forging.write_text(hostile.FORGE_THE_PROFILE)
    profiles = [
        profile_kernel(
            KernelSource.read(kernel), task, targets=("v5e",), trace_root=tmp_path / "traces"
        )
        for kernel in (honest, forging)
    ]
    assert [len(p.kernels) for p in profiles] == [1, 1]
    roofline = [p.estimates[0].roofline_seconds for p in profiles]
    assert roofline[0] is not None and roofline[1] == roofline[0]
    assert profiles[1].to_json()["kernels"] == profiles[0].to_json()["kernels"]


def test_a_kernel_that_blocks_its_own_program_file_is_rejected_at_trace(harness, task, tmp_path):
    """A kernel that plants a directory where the tracer writes its program fails its own trace
    (not a harness error)."""
    source = (
        'import os\n\nos.mkdir("program-0.bin")\n\n\n'
        "def computation(x):\n    return x * 2.0 + 1.0\n"
    )
    failure = _rejected_at_trace(harness, source, task, tmp_path)
    assert failure.reason == Reason.PROGRAM_UNWRITABLE
