"""Fixtures for checking built-in suite references against independent formulations."""

import pytest

from maxkernel_tui.kernels import reference_runtime as runtime


@pytest.fixture
def reference(suite_tasks):
    """reference(task_id, config="check", seed=0) -> (module, dynamic_args, static_args, output)."""
    by_id = {task.task_id: task for task in suite_tasks}

    def run(task_id: str, config: str = "check", seed: int = 0):
        task = by_id[task_id]
        module = runtime.load_reference(task)
        dynamic, static, output = runtime.run_reference(task, module, config, seed)
        return module, dynamic, static, output

    return run
