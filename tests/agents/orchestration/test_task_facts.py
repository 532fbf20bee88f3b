"""What every prompt says about the task: the shapes of the configurations an agent may see,
never the held-out ones, whichever way the task got them (declared or derived)."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.orchestration import session
from maxkernel_tui.kernels.description import ConfigShapes, TaskDescription, TensorSpec
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks


def _shapes(rows: int) -> ConfigShapes:
    spec = TensorSpec(shape=[rows, 128], dtype="float32")
    return ConfigShapes(inputs=[spec], static=[], outputs=[spec])


@pytest.fixture
def described(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(tasks, *_args, **_kwargs):  # the describe worker's answer, without jax
        configs = {
            name: _shapes(rows)
            for name, rows in (("bench", 4096), ("check", 512), ("heldout", 7168))
        }
        return {t.task_id: TaskDescription(task_id=t.task_id, configs=configs) for t in tasks}

    monkeypatch.setattr(session, "describe_tasks", fake)


def test_the_facts_name_bench_and_check_shapes_but_never_heldout(described):
    task = find_task("12p", load_tasks(builtin_suite_dir())[0])
    facts = session.task_facts(task, "v5e")
    assert "configuration bench" in facts and "configuration check" in facts
    assert "configuration heldout" not in facts
    assert "7168" not in facts.split("reference.py:")[0]
