"""A starter kernel file for a task: Pallas imports and the reference's signature. No jax here.

It is a skeleton to edit, not a solution; the workbench labels it so.
"""

from __future__ import annotations

import ast

from maxkernel_tui.kernels.task import Task

_TEMPLATE = '''"""{task_id}: starter kernel, a skeleton to edit (not a solution).

Plan the tiling, write the kernel body, then evaluate (ctrl+e) and profile (ctrl+o).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _kernel(x_ref, o_ref):
    # One block of the computation: read from the input refs, write every element of o_ref.
    o_ref[...] = x_ref[...]


def {entry}({params}):
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct({first}.shape, {first}.dtype),
    )({first})
'''


def starter_source(task: Task) -> str:
    """The skeleton, its entry point named and its parameters ordered as the task's reference
    file writes them (`computation` in reference.py; `workload` in JAXBench's baseline.py)."""
    entry = task.entry_points[0]
    params = _reference_parameters(task, entry) or ["x"]
    return _TEMPLATE.format(
        task_id=task.task_id, entry=entry, params=", ".join(params), first=params[0]
    )


def _reference_parameters(task: Task, entry: str) -> list[str]:
    tree = ast.parse(task.reference_path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return [a.arg for a in node.args.args]
    return []
