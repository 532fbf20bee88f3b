"""Which of a derived task's equal sizes the reference really ties, found by tracing it. Imports
jax (through reference_runtime); runs in the describe worker only.

Sizes equal in production move together in the static plan (derive/rules.py): nothing in the
source says whether they meet in an equation. Here each size of such a value is moved alone
(doubled, which keeps every divisibility) and the inputs and the reference are traced
(`jax.eval_shape`: no memory, no compute). A size whose move traces is free of the others; the
rest are split into the smallest sets that trace when moved together (a contraction's two sides,
a weight's rows and an input's columns, written under two names): first as pairs, most ties
being pairs, then by shrinking. The describe worker plans a derived task's held-out sizes from
the answer (kernels/describe.py, kept by kernels/traced_ties.py) and `tasks import` writes
them, so a kernel that binds a size by its value meets a configuration where the values differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.task import IMPORTED_CATEGORY, Task, TaskError

PROBE = "tie_probe"  # the configuration each probe traces, removed afterwards
# traces one task may spend (each an eval_shape of inputs and reference); a move not traced
# by then counts as tied: its sizes keep moving together, as the static plan has them
MAX_TRACES = 24


def tie_groups(task: Task, module: ModuleType) -> list[list[str]]:
    """The sizes of every production value held by more than one size, split into the groups
    that must move together (a free size is a group of its own); [] for a task whose equal
    sizes all share one name. Probed for derived tasks and imported ones (`tasks import` writes
    their CONFIGS from the answer), not for the built-in suite's declared configurations."""
    configs = getattr(module, "CONFIGS", None)
    if not (task.derived or task.category == IMPORTED_CATEGORY) or not isinstance(configs, dict):
        return []
    production = {k: v for k, v in configs.get(BENCH, {}).items() if type(v) is int}
    by_value: dict[int, list[str]] = {}
    for name, value in production.items():
        by_value.setdefault(value, []).append(name)
    probes = _Probes(task, module, production)
    groups: list[list[str]] = []
    try:
        for names in (n for n in by_value.values() if len(n) > 1):
            groups += probes.split(names)
    finally:
        configs.pop(PROBE, None)
    return groups


def scaled_groups(task: Task, module: ModuleType) -> list[list[str]]:
    """Sizes of different production values that must scale together, where the derived plan
    does not trace (28k: LayerNorm weights of `out_channels` = 64 broadcast over the last axis,
    twice W = 32 after a stride-2 transposed conv; halving W alone breaks the broadcast): every
    size whose doubling alone does not trace, split into the smallest sets that trace doubled
    together (doubling keeps their ratios). [] where the plan traces, or no set is found."""
    configs = getattr(module, "CONFIGS", None)
    if not task.derived or not isinstance(configs, dict) or _plan_traces(task, module):
        return []
    production = {k: v for k, v in configs.get(BENCH, {}).items() if type(v) is int}
    probes = _Probes(task, module, production)
    try:
        groups = probes.split(list(production))
    finally:
        configs.pop(PROBE, None)
    return [g for g in groups if len({production[n] for n in g}) > 1 and probes.traces(g)]


def _plan_traces(task: Task, module: ModuleType) -> bool:
    try:
        for config in task.configs:
            runtime.io_specs(task, module, config)
    except TaskError:
        return False
    return True


@dataclass
class _Probes:
    """Traces of the task with some sizes moved, MAX_TRACES at most."""

    task: Task
    module: ModuleType
    production: dict[str, int]
    left: int = MAX_TRACES

    def split(self, names: list[str]) -> list[list[str]]:
        """`names` (of one value) as free sizes and smallest sets that move together."""
        tied = [n for n in names if not self.traces([n])]
        groups = [[n] for n in names if n not in tied]
        while tied:
            group = self._pair(tied) or self._shrunk(tied)
            groups.append(group)
            tied = [n for n in tied if n not in group]
        return groups

    def _pair(self, tied: list[str]) -> list[str] | None:
        """tied[0] and the first other size that moves with it (a contraction's two sides, a
        bias and the columns it is added to): most ties are pairs."""
        return next(([tied[0], o] for o in tied[1:] if self.traces([tied[0], o])), None)

    def _shrunk(self, tied: list[str]) -> list[str]:
        """The sizes around tied[0] that trace when moved together, shrunk one by one."""
        group = list(tied)
        for other in tied[1:]:
            smaller = [n for n in group if n != other]
            if self.traces(smaller):
                group = smaller
        return group

    def traces(self, moved: list[str]) -> bool:
        """Whether the inputs and the reference trace with the `moved` sizes doubled (False
        once the budget is spent: untraced sizes stay together)."""
        if self.left <= 0:
            return False
        self.left -= 1
        sizes = {n: 2 * v if n in moved else v for n, v in self.production.items()}
        self.module.CONFIGS.pop(PROBE, None)
        try:
            probing = runtime.with_extra_configs(self.task, self.module, {PROBE: sizes})
            runtime.io_specs(probing, self.module, PROBE)
        except TaskError:
            return False
        return True
