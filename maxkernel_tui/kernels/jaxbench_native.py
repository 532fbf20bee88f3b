"""JAXBench's native task folders, read as they are. No jax; nothing of the task runs here.

A folder `JAXBench/benchmark/<id>/` holds `baseline.py` (`CONFIG`, a dict of names and integer
dimensions; `create_inputs(dtype=jnp.bfloat16)` returning a tuple; `workload(*inputs)`; optional
`get_flops()`, plus a `benchmark()` timing helper and a `__main__` block) and, for some, an
expert `optimized.py` with the same interface. We judge it as JAXBench's harness does: inputs
from `create_inputs(dtype=jnp.bfloat16)`, allclose at 1e-2/1e-2, entry point `workload`; `check`
and `heldout` are derived from `CONFIG`'s integer entries (kernels/derive/).
"""

from __future__ import annotations

import ast
from pathlib import Path

from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.derive.plan import plan_derivation
from maxkernel_tui.kernels.derive.sites import config_dict
from maxkernel_tui.kernels.task import (
    JAXBENCH_BASELINE,
    JAXBENCH_EXPERT,
    JAXBENCH_INPUTS_NOTE,
    JAXBENCH_TOLERANCE,
    Task,
    TaskError,
    TaskFormat,
    Tolerance,
)

BUILDER = "create_inputs"
ENTRY = "workload"
FLOPS = "get_flops"


def load_jaxbench_task(folder: Path, baseline: ast.Module) -> Task:
    """The task a JAXBench folder defines; TaskError names what is missing."""
    path = folder / JAXBENCH_BASELINE
    functions = {n.name for n in baseline.body if isinstance(n, ast.FunctionDef)}
    for required in (BUILDER, ENTRY):
        if required not in functions:
            raise TaskError(path, f"does not define `{required}` (JAXBench's baseline format)")
    derivation = plan_derivation(baseline, BUILDER)
    configs = derivation.configs()
    tolerance = Tolerance(JAXBENCH_TOLERANCE, JAXBENCH_TOLERANCE)
    expert = folder / JAXBENCH_EXPERT
    notes = [JAXBENCH_INPUTS_NOTE, "tolerance: JAXBench's allclose(atol=1e-2, rtol=1e-2)"]
    if FLOPS in functions:
        notes.append("flops: the task's own get_flops()")
    return Task(
        task_id=folder.name,
        folder=folder.resolve(),
        description=_description(baseline),
        category="jaxbench",
        operation=_operation(baseline),
        configs=configs,
        tolerances={name: tolerance for name in configs},
        named_configs=derivation.derived,
        source_format=TaskFormat.JAXBENCH,
        reference_file=JAXBENCH_BASELINE,
        entry_points=("workload", "computation"),
        derivation=derivation,
        expert_path=expert.resolve() if expert.is_file() else None,
        format_notes=tuple(notes),
    )


def _config_strings(baseline: ast.Module) -> dict[str, str]:
    table = config_dict(baseline)
    if table is None:
        return {}
    return {
        key.value: value.value
        for key, value in zip(table.keys, table.values)
        if isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and isinstance(value, ast.Constant)
        and isinstance(value.value, str)
    }


def _operation(baseline: ast.Module) -> str:
    strings = _config_strings(baseline)
    words = [strings[k] for k in ("operator", "name") if k in strings]
    return words[0] if words else "JAXBench workload"


def _description(baseline: ast.Module) -> str:
    doc = ast.get_docstring(baseline) or ""
    strings = _config_strings(baseline)
    facts = ", ".join(f"{k}: {v}" for k, v in strings.items())
    return "\n".join(part for part in (doc.strip(), facts) if part) or f"JAXBench {BENCH} workload"
