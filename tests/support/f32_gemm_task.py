"""An all-f32 GEMM + bias + ReLU task (41k's computation) written into a test's folder, at a
chosen tolerance and production size: the tasks of the precision tests."""

from __future__ import annotations

from pathlib import Path

from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import Task

# 41k's production shapes
BENCH = {"rows": 4096, "depth": 8192, "cols": 8192}


def gemm_relu_reference(bench: dict[str, int] = BENCH) -> str:
    return f'''"""relu(x @ W + b), all f32 (a task of the precision tests)."""
import jax
import jax.numpy as jnp

CONFIGS = {{
    "bench": {bench!r},
    "check": {{"rows": 64, "depth": 512, "cols": 256}},
    "heldout": {{"rows": 40, "depth": 384, "cols": 384}},
}}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_x, key_w, key_b = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(key_x, (c["rows"], c["depth"]), jnp.float32)
    weight = jax.random.normal(key_w, (c["depth"], c["cols"]), jnp.float32) * 0.02
    bias = jax.random.normal(key_b, (c["cols"],), jnp.float32) * 0.02
    return (x, weight, bias), ()


def computation(x, weight, bias):
    return jax.nn.relu(jnp.matmul(x, weight) + bias)
'''


def write_task(folder: Path, tolerance: float, reference: str | None = None) -> Task:
    """`reference` (default: the GEMM at 41k's shapes) as a task at atol = rtol = tolerance."""
    reference = reference or gemm_relu_reference()
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(reference)
    (folder / "kernel_task.yaml").write_text(
        f"task_id: {folder.name}\ndescription: {reference.splitlines()[0][3:-3]}\n"
        f"atol: {tolerance}\nrtol: {tolerance}\n"
    )
    return load_task(folder)
