"""Where an evaluation's verdicts were earned: the shapes and inputs of each check, in words
for the report. No jax.
"""

from __future__ import annotations

from maxkernel_tui.kernels.config_names import BENCH, HELDOUT
from maxkernel_tui.kernels.evaluation.protocol import Run
from maxkernel_tui.kernels.report.checks import EDGE, NOTE, PASS, SMALL_SHAPES_ONLY, Check
from maxkernel_tui.kernels.report.reasons import Agreement
from maxkernel_tui.kernels.task import Task

# What the production tiles cover where gradients are judged: the forward's kernels only.
GRADIENTS_AT_SMALL_SHAPES = (
    f"gradients {SMALL_SHAPES_ONLY} (the production tiles sample the forward's kernels, "
    "not the backward's)"
)


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
    """Which gradients were compared where (the numerics checks that passed), and whether any
    of them at production shapes; None where the task asks for none."""
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
    scope = "at production shapes too" if task.configs[0] in seeds else GRADIENTS_AT_SMALL_SHAPES
    return (
        f"gradients of {names}: compared with jax.vjp of the reference on seeded random "
        f"cotangents at {where}; {scope}"
    )
