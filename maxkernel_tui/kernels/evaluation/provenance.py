"""Where an evaluation's verdicts were earned: the shapes and inputs of each check, in words
for the report. No jax.
"""

from __future__ import annotations

from maxkernel_tui.kernels.config_names import BENCH, HELDOUT
from maxkernel_tui.kernels.evaluation.protocol import Run
from maxkernel_tui.kernels.report.checks import (
    EDGE,
    NOTE,
    PASS,
    SMALL_SHAPES_ONLY,
    TILES,
    Check,
)
from maxkernel_tui.kernels.report.reasons import Agreement, TilesFigures
from maxkernel_tui.kernels.task import Task

# Where no comparison of the gradients at production shapes passed.
GRADIENTS_AT_SMALL_SHAPES = f"gradients {SMALL_SHAPES_ONLY}"


def verdict_inputs(task: Task, runs: list[Run]) -> list[str]:
    """One line per group of checks: which configuration, how its sizes came, how many seeds;
    then the task's warnings (production-shape fallback, JAXBench's input convention)."""
    bench = task.configs[0]
    lines = [f"trace, tpu_lower, tpu_compile: production shapes ({_config(task, bench)})"]
    by_config: dict[str, int] = {}
    for config, _ in runs:
        by_config[config] = by_config.get(config, 0) + 1
    for config, count in by_config.items():
        # an edge case is not one of the task's configurations: it has a check of its own
        check = HELDOUT if config == HELDOUT else "numerics" if config in task.configs else EDGE
        fresh = task.named_configs and not (config.startswith(BENCH) and not task.derived)
        inputs = f"{count} fresh seed(s)" if fresh else "the task's own fixed inputs"
        lines.append(f"{check}: {_config(task, config)} on {inputs}")
    lines += [f"{NOTE}: {warning}" for warning in task.warnings]
    return lines


def _config(task: Task, config: str) -> str:
    derivation = task.derivation
    if derivation is None or not derivation.sizes.get(config):
        return config
    origin = "production" if config == BENCH else "derived"
    return f"{config}, {origin}: {derivation.summary(config)}"


def gradient_evidence(task: Task, checks: list[Check]) -> str | None:
    """Which gradients were compared where (the numerics checks that passed, the backward's
    production tiles), and the scope that earns; None where the task asks for none."""
    if not task.gradients:
        return None
    seeds: dict[str, list[int]] = {}
    for check in checks:
        if check.status == PASS and isinstance(check.figures, Agreement):
            for run in check.figures.runs:
                if run.gradient == task.gradients[0]:
                    seeds.setdefault(run.config, []).append(run.seed)
    names = ", ".join(task.gradients)
    if not seeds:
        return f"gradients of {names}: not compared (the evaluation stopped before)"
    where = "; ".join(
        f"{config} seed(s) {', '.join(map(str, found))}" for config, found in seeds.items()
    )
    return (
        f"gradients of {names}: compared with jax.vjp of the reference on seeded random "
        f"cotangents at {where}; {_gradients_scope(task, checks, seeds)}"
    )


def _gradients_scope(task: Task, checks: list[Check], seeds: dict[str, list[int]]) -> str:
    """Whether the gradients were compared at production shapes: in full, or on the backward's
    sampled tiles (every gradient the sample decides elements of), else at small shapes."""
    if task.configs[0] in seeds:
        return "at production shapes too (in full)"
    sampled = next(
        (
            c.figures
            for c in checks
            if c.name == TILES and isinstance(c.figures, TilesFigures) and c.figures.gradients
        ),
        None,
    )
    passed = any(
        c.status == PASS and isinstance(c.figures, TilesFigures) and c.figures.gradients
        for c in checks
    )
    if sampled is None or not passed:
        return GRADIENTS_AT_SMALL_SHAPES
    decided = sampled.gradients.split(", ")
    left = [name for name in task.gradients if name not in decided]
    verified = f"gradients of {sampled.gradients} verified at production shapes on sampled tiles"
    if not left:
        return f"{verified} of the backward's kernels"
    return (
        f"{verified} of the backward's kernels; gradients of {', '.join(left)} "
        f"{SMALL_SHAPES_ONLY} (the sample decides none of their elements)"
    )
