"""A task no family of the built-in agent plans: rows sorted (a data-dependent permutation),
written into a folder of the tests' own."""

from __future__ import annotations

from pathlib import Path

REFERENCE = '''"""Each row of x sorted."""
import jax
import jax.numpy as jnp

CONFIGS = {
    "bench": {"rows": 4096, "cols": 1024},
    "check": {"rows": 64, "cols": 256},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    return (jax.random.normal(jax.random.key(seed), (c["rows"], c["cols"]), jnp.float32),), ()


def computation(x):
    return jnp.sort(x, axis=-1) * 2.0
'''


def write_sorting_task(folder: Path) -> Path:
    """The task's folder, made under `folder`."""
    task = folder / "row_sort"
    task.mkdir(parents=True)
    (task / "reference.py").write_text(REFERENCE)
    (task / "kernel_task.yaml").write_text(
        "task_id: row_sort\ndescription: rows sorted, doubled\natol: 1e-5\nrtol: 1e-5\n"
    )
    return task
