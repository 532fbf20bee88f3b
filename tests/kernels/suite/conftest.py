"""Fixtures for checking built-in suite references against independent formulations."""
import importlib.util
import pathlib
from types import ModuleType

import jax
import pytest

SUITE_DIR = pathlib.Path(__file__).resolve().parents[3] / "maxkernel_tui" / "kernels" / "suite"


def _load(task_id: str) -> ModuleType:
    path = SUITE_DIR / task_id / "reference.py"
    spec = importlib.util.spec_from_file_location(f"suite_ref_{task_id}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def reference():
    """reference(task_id) -> (module, dynamic_args, static_args, output) on the `check` config."""

    def run(task_id: str, config: str = "check", seed: int = 0):
        module = _load(task_id)
        dynamic, static = module.get_inputs(config, seed)
        output = jax.jit(module.computation, static_argnums=tuple(
            range(len(dynamic), len(dynamic) + len(static))))(*dynamic, *static)
        return module, dynamic, static, output

    return run
