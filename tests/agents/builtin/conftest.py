"""Tasks for the built-in agent's tests: our own outside the suite (one folder each under
tasks/, one per family the agent learned), and a suite task copied under a meaningless name (the
agent must not care what a task is called)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.task import Task

OWN_TASKS = sorted(p.name for p in (Path(__file__).parent / "tasks").iterdir() if p.is_dir())
RENAMED_SOURCE = "45k_Gemm_GroupNorm_Swish_Multiply_Swish"


@pytest.fixture(scope="session", params=OWN_TASKS)
def own_task(request: pytest.FixtureRequest) -> Task:
    return load_task(Path(__file__).parent / "tasks" / request.param)


@pytest.fixture(scope="session")
def renamed_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """The suite's 45k under the folder and id `op_7f3a`, its labels and description gone."""
    folder = tmp_path_factory.mktemp("renamed") / "op_7f3a"
    shutil.copytree(builtin_suite_dir() / RENAMED_SOURCE, folder)
    meta = yaml.safe_load((folder / "kernel_task.yaml").read_text())
    meta.update(task_id="op_7f3a", description="an operation")
    for label in ("category", "operation"):
        meta.pop(label, None)
    (folder / "kernel_task.yaml").write_text(yaml.safe_dump(meta))
    return load_task(folder)


@pytest.fixture(scope="module")
def harness():
    """The real harness, shared by a module's tests (its workers start once)."""
    with Harness() as shared:
        yield shared
