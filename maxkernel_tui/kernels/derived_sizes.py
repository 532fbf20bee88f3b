"""Gives a loaded plain or JAXBench reference module our interface: `CONFIGS` and
`get_inputs(config="bench", seed=0)` returning `(dynamic, static)`, and `computation`.

Runs only in worker processes, on modules already executed there; this module imports nothing
of jax itself (JAXBench's `dtype=jnp.bfloat16` is taken from the jax the task imported).

A derived configuration sets its sizes where the task's code reads them: the builder's locals,
dicts and shape literals (through the rewritten builder, derive/rewrite.py), module-level size
constants and dicts of sizes such as JAXBench's `CONFIG` (on the module itself, so
`computation` sees them too), and the same names of every candidate module bound to the task
(an expert file that reads its own `CONFIG`).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.derive.plan import Derivation
from maxkernel_tui.kernels.derive.rewrite import BUILDER, MIX, builder_source, mix_seed
from maxkernel_tui.kernels.derive.sites import SiteKind, entry_value
from maxkernel_tui.kernels.task import Task, TaskError, TaskFormat

_BOUND = "__derived_bound_modules__"  # candidates whose module-level sizes follow the task's
_STATIC_POSITIONS = "__jaxbench_static_positions__"


def install(task: Task, module: ModuleType) -> None:
    """Make `module` (the executed reference) answer get_inputs(config, seed) and computation."""
    derivation = task.derivation
    if derivation is None:
        return
    if task.source_format == TaskFormat.JAXBENCH:
        _install_entry(task, module)
    if derivation.derived:
        _install_derived(task, module, derivation)
    elif task.source_format == TaskFormat.JAXBENCH:
        builder = getattr(module, derivation.builder)
        module.__dict__["get_inputs"] = lambda: _split(module, _call_builder(task, builder, ()))


def bind_candidate(task: Task, reference: ModuleType, candidate: ModuleType) -> None:
    """The candidate's entry point as `computation`, and its module-level sizes (JAXBench's
    `CONFIG`) kept equal to the task's for every configuration."""
    if task.source_format == TaskFormat.JAXBENCH:
        entry = next(
            (
                getattr(candidate, n, None)
                for n in task.entry_points
                if callable(getattr(candidate, n, None))
            ),
            None,
        )
        if entry is None:
            raise TaskError(
                task.reference_path, "the kernel defines neither workload nor computation"
            )
        candidate.__dict__["computation"] = _reordering(reference, entry)
    bound = getattr(reference, _BOUND, None)
    if bound is not None:
        bound.append(candidate)


def _install_derived(task: Task, module: ModuleType, derivation: Derivation) -> None:
    tree = ast.parse(task.reference_path.read_text(encoding="utf-8"))
    code = compile(
        builder_source(tree, derivation.builder, derivation.sites),
        str(task.reference_path),
        "exec",
    )
    module.__dict__[MIX] = mix_seed
    exec(code, module.__dict__)
    builder = module.__dict__[BUILDER]
    configs = {name: dict(sizes) for name, sizes in derivation.sizes.items()}
    module.__dict__["CONFIGS"] = configs  # edge cases join it (reference_runtime.py)
    bound: list[ModuleType] = [module]
    setattr(module, _BOUND, bound)

    def get_inputs(config: str = BENCH, seed: int = 0) -> Any:
        sizes = configs[config]
        for target in bound:
            _set_module_sizes(target, derivation, sizes)
        produced = _call_builder(task, builder, (sizes, seed))
        return _split(module, produced) if task.source_format == TaskFormat.JAXBENCH else produced

    module.__dict__["get_inputs"] = get_inputs


def _set_module_sizes(module: ModuleType, derivation: Derivation, sizes: dict[str, int]) -> None:
    for site in derivation.sites:
        if site.name not in sizes:
            continue
        table = module.__dict__.get(site.table)
        if site.kind == SiteKind.MODULE and isinstance(module.__dict__.get(site.name), int):
            module.__dict__[site.name] = sizes[site.name]
        elif site.kind == SiteKind.CONFIG and isinstance(table, dict) and site.key in table:
            table[site.key] = entry_value(site, table[site.key], sizes[site.name])


def _call_builder(task: Task, builder: Callable[..., Any], leading: tuple[Any, ...]) -> Any:
    """JAXBench's harness always asks for bf16 inputs; plain builders keep their defaults."""
    if task.source_format == TaskFormat.JAXBENCH and "dtype" in builder.__code__.co_varnames:
        jnp = sys.modules["jax.numpy"]
        return builder(*leading, dtype=jnp.bfloat16)
    return builder(*leading)


def _split(module: ModuleType, produced: Any) -> tuple[list[Any], list[Any]]:
    """create_inputs' tuple as (arrays, Python scalars); where the scalars sat is remembered so
    `computation` can put them back for `workload`."""
    items = list(produced) if isinstance(produced, (tuple, list)) else [produced]
    positions = [i for i, item in enumerate(items) if not hasattr(item, "shape")]
    setattr(module, _STATIC_POSITIONS, positions)
    return [x for i, x in enumerate(items) if i not in positions], [items[i] for i in positions]


def _install_entry(task: Task, module: ModuleType) -> None:
    workload = getattr(module, "workload", None)
    if not callable(workload):
        raise TaskError(task.reference_path, "`workload` is not callable")
    module.__dict__["computation"] = _reordering(module, workload)


def _reordering(reference: ModuleType, entry: Callable[..., Any]) -> Callable[..., Any]:
    """computation(*arrays, *scalars) -> entry(...) with the scalars back in their places."""

    def computation(*args: Any) -> Any:
        positions = getattr(reference, _STATIC_POSITIONS, [])
        if not positions:
            return entry(*args)
        n_dynamic = len(args) - len(positions)
        dynamic, static = list(args[:n_dynamic]), list(args[n_dynamic:])
        merged = []
        for index in range(len(args)):
            merged.append(static.pop(0) if index in positions else dynamic.pop(0))
        return entry(*merged)

    computation.__wrapped__ = entry  # type: ignore[attr-defined]  # its signature is shown
    return computation
