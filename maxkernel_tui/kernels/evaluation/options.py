"""How an evaluation is asked for (`EvalOptions`, an agent's `Probe`) and the runs it makes
from that: the seeds and configurations of its numerics, its edge cases, and the
configurations its candidate is traced at. No jax here."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from maxkernel_tui.kernels.config_names import CHECK, HELDOUT
from maxkernel_tui.kernels.evaluation.protocol import ProbeStage, Run
from maxkernel_tui.kernels.evaluation.tiles import plan as tiles_plan
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.targets import DEFAULT_TARGET
from maxkernel_tui.kernels.task import Task


class UsageError(ValueError):
    """The request itself is wrong (e.g. a TPU generation libtpu does not know)."""


@dataclass(frozen=True)
class EvalOptions:
    """How a kernel is evaluated. The one place its defaults are set: the engineer's evaluation
    in the workbench, an agent's, and `maxkernel-tui eval` without flags all take these."""

    target: str = DEFAULT_TARGET
    config: str | None = None  # numerics on this configuration only (default: check + heldout)
    seeds: int = 2  # fresh random seeds on the check configuration
    timeout: float = 300.0  # seconds for everything the candidate does
    detect_races: bool = False
    require_pallas: bool = True  # False only for sanity runs of a reference against itself
    # Validated edge cases (name, parameters of the task's CONFIGS): numerics on each, one seed,
    # with the check tolerance; reported as the `edge` check.
    extra_configs: tuple[tuple[str, dict[str, int]], ...] = ()
    # Numerics on extra_configs alone, for a kernel already judged on check, held-out and
    # production shapes (the tester's pass after a kernel is accepted): the static, trace,
    # lowering, compile and production checks run again, timing and the expert comparison do
    # not (EvalReport.with_edge_pass joins the two reports).
    edges_only: bool = False
    # Sampled output tiles of the kernels at production shapes, against the reference computed
    # by XLA on the CPU (evaluation/tiles/sampled_run.py): output blocks drawn at random beyond
    # the grid's corners; None turns the sample off (the verdict then says small shapes only).
    tile_blocks: int | None = field(default_factory=lambda: tiles_plan.default_tile_blocks())


@dataclass(frozen=True)
class Probe:
    """An agent's quick look at a candidate (the `lower` and `check` tools, agents/tools): the
    static rules, then trace, TPU lowering and compile at `config` rather than the production
    shapes, up to `through`; with NUMERICS, one run at `config` and `seed` compared with the
    reference. No production defences, timing or expert comparison: feedback, not a verdict."""

    config: str
    through: ProbeStage
    target: str = DEFAULT_TARGET
    seed: int = 0
    timeout: float = 120.0


def numerics_plan(task: Task, options: EvalOptions, report: EvalReport) -> list[Run]:
    """(configuration, seed) pairs: fresh seeds on check, one on held-out; a plain task's own
    inputs."""
    if not task.named_configs:
        return [(name, 0) for name in ([options.config] if options.config else task.configs)]
    seeds = [secrets.randbelow(2**31 - 1) for _ in range(max(options.seeds, 1))]
    report.seeds = seeds
    if options.config is not None:
        count = 1 if options.config == HELDOUT else len(seeds)
        return [(options.config, seed) for seed in seeds[:count]]
    plan = [(CHECK, seed) for seed in seeds] if CHECK in task.configs else []
    # One seed per edge case: they test shapes, not random draws; derived so a report's seeds
    # say it.
    edges = [(name, seeds[0] ^ (0xED6E + n)) for n, (name, _) in enumerate(options.extra_configs)]
    if options.edges_only:
        return edges
    plan += edges
    if HELDOUT in task.configs:
        plan.append((HELDOUT, seeds[0] ^ 0x5EED))
    return plan or [(task.configs[0], seeds[0])]


def traced_configs(runs: list[Run]) -> list[str]:
    """The configurations of `runs`, each once, in order."""
    return list(dict.fromkeys(config for config, _ in runs))


def extra_configs(task: Task, options: EvalOptions) -> dict[str, dict[str, int]]:
    """The edge cases that apply: none for a single-configuration run or a task whose get_inputs
    takes no named configuration (the plain adapted format)."""
    if not task.named_configs or options.config is not None:
        return {}
    clashes = [name for name, _ in options.extra_configs if name in task.configs]
    if clashes:
        raise UsageError(
            f"extra configuration name(s) {clashes} clash with the task's own configurations"
        )
    return {name: dict(params) for name, params in options.extra_configs}
