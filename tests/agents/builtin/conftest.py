"""Tasks for the built-in agent's tests: one of our own outside the suite, and a suite task
copied under a meaningless name (the agent must not care what a task is called)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.task import Task

OWN_TASK = Path(__file__).parent / "tasks" / "gemm_hardswish_layernorm"
RENAMED_SOURCE = "45k_Gemm_GroupNorm_Swish_Multiply_Swish"


@pytest.fixture(scope="session")
def own_task() -> Task:
    return load_task(OWN_TASK)


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
