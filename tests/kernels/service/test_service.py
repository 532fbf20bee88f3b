"""The evaluation service: a kernel travels as its text (a kernel with no file at all is judged,
and the user's file is never read again once the call starts), the task's expert is recognised
by its text, and one evaluation snapshots the task once, the expert comparison included."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.kernels.evaluation import harness as harness_module
from maxkernel_tui.kernels.evaluation.profiling import profile as profile_module
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.report.checks import ACCEPTED, EvalReport
from maxkernel_tui.kernels.report.reasons import Problems, Reason, Said, StaticRule
from maxkernel_tui.kernels.service.service import EvaluationService, KernelSource
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from maxkernel_tui.kernels.snapshot import TaskSnapshot, snapshot_task
from maxkernel_tui.kernels.task import Task
from tests.support.paths import KERNELS


class RecordingHarness:
    """Answers each evaluation with an empty report, recording what it was given."""

    def __init__(self) -> None:
        self.asked: list[tuple[KernelSource, EvalOptions]] = []

    def evaluate(self, kernel: KernelSource, task: Task, options: EvalOptions, on_check=None):
        self.asked.append((kernel, options))
        return EvalReport(task.task_id, kernel.name, [options.target], "recorded")


def test_the_service_hands_the_harness_the_text_and_its_options(suite_tasks, tmp_path) -> None:
    harness = RecordingHarness()
    setup = EvaluationSetup.local(EvalOptions(target="v5e", seeds=1))
    task = find_task("12p", suite_tasks)
    service = EvaluationService(setup, task, tmp_path, harness=lambda: harness)
    kernel = KernelSource("def computation(x):\n    return x\n", "mine.py")
    service.set_extra_configs([("tiny", {"rows": 8})])
    assert service.evaluate(kernel, edges_only=True).kernel == "mine.py"
    ((given, options),) = harness.asked
    assert given is kernel and not (tmp_path / "mine.py").exists()
    assert options == EvalOptions(
        target="v5e", seeds=1, edges_only=True, extra_configs=(("tiny", {"rows": 8}),)
    )
    assert service.probes and service.slots == 1


def test_the_expert_is_recognised_by_its_text_wherever_it_comes_from(suite_tasks, tmp_path):
    task = find_task("8p", suite_tasks)
    assert task.expert_path is not None
    snapshot: TaskSnapshot = snapshot_task(task, tmp_path)
    expert_text = task.expert_path.read_text(encoding="utf-8")
    assert KernelSource.read(task.expert_path).is_expert(snapshot)
    assert KernelSource(expert_text, "copied.py").is_expert(snapshot)  # no file, same text
    honest = KernelSource.read(KERNELS / "honest" / "8p_GEMM.py")
    assert not honest.is_expert(snapshot)


def test_a_file_that_cannot_be_read_is_refused_with_the_reason(tmp_path: Path) -> None:
    missing = KernelSource.read(tmp_path / "gone.py")
    assert missing.name == "gone.py" and missing.refusal is not None
    assert missing.refusal.reason == Reason.SOURCE_UNREADABLE
    assert isinstance(missing.refusal.figures, Said)
    assert missing.refusal.figures.text.startswith(f"{tmp_path / 'gone.py'}: ")
    huge = KernelSource("x = 1\n" * 200_000, "huge.py")
    assert huge.too_large is None and huge.refusal is not None  # too large once it is text
    assert huge.refusal.reason == Reason.STATIC_RULES_BROKEN
    assert isinstance(huge.refusal.figures, Problems)
    assert [b.rule for b in huge.refusal.figures.problems] == [StaticRule.TOO_LARGE]


@pytest.mark.slow  # a whole evaluation: tracer, judge, reference and the expert's estimate
def test_a_kernel_given_only_as_text_is_judged_on_one_snapshot(suite_tasks, tmp_path, monkeypatch):
    taken: list[str] = []

    def counted(task: Task, root: Path) -> TaskSnapshot:
        taken.append(task.task_id)
        return snapshot_task(task, root)

    monkeypatch.setattr(harness_module, "snapshot_task", counted)
    monkeypatch.setattr(profile_module, "snapshot_task", counted)
    task = find_task("8p", suite_tasks)
    source = (KERNELS / "honest" / "8p_GEMM.py").read_text(encoding="utf-8")
    setup = EvaluationSetup.local(EvalOptions(target="v5e", seeds=1))
    service = EvaluationService(setup, task, tmp_path / "traces")
    try:
        report = service.evaluate(KernelSource(source, "typed_in.py"))
    finally:
        service.close()
    assert report.verdict == ACCEPTED, report.failure
    assert report.kernel == "typed_in.py"
    assert report.expert is not None and report.expert.kind == "estimated"  # the expert's profile
    assert taken == [task.task_id]  # trace, judge, reference and the expert: one snapshot
