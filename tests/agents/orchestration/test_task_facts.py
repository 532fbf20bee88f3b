"""What every prompt says about the task: the shapes of the configurations an agent may see,
never the held-out ones, whichever way the task got them (declared or derived); a JAXBench
folder's own reference file and entry point."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.orchestration import session
from maxkernel_tui.kernels.description import ConfigShapes, TaskDescription, TensorSpec
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_task, load_tasks
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import GOOD, Bench, FakeTools, kernel, plan
from tests.support.task_folders import write_jaxbench


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


def test_the_facts_of_a_jaxbench_folder_show_its_baseline_and_its_entry_point(described, tmp_path):
    task = load_task(write_jaxbench(tmp_path))
    facts = session.task_facts(task, "v5e")
    assert "baseline.py:\n```python\n" in facts and "def workload(x, w):" in facts
    assert "The kernel defines `workload` with the reference's signature." in facts
    assert "reference.py" not in facts


@pytest.mark.asyncio
async def test_on_a_jaxbench_task_the_agents_are_asked_for_workload_and_it_is_taken(
    bench: Bench, tmp_path
):
    workload = GOOD.replace("def computation(", "def workload(")
    provider = RoleProvider({"planner": [plan()], "implementer": [kernel(workload)]})
    tools = FakeTools(task=load_task(write_jaxbench(tmp_path)))
    outcome = await bench.engine(provider, tools=tools).run()

    assert outcome.best is not None and "def workload(" in outcome.best.source
    assert tools.evaluated == [workload]  # taken as written: no retry, no model error
    [implementer] = [r for r in provider.requests if r.context["role"] == "implementer"]
    assert "defines `workload` with the reference's signature" in implementer.system
