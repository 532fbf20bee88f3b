"""Where an evaluation's verdicts were earned: the shapes and inputs of each check, in words
for the report. No jax.
"""

from __future__ import annotations

from maxkernel_tui.kernels.config_names import BENCH, HELDOUT
from maxkernel_tui.kernels.evaluation.protocol import Run
from maxkernel_tui.kernels.report.checks import EDGE, NOTE
from maxkernel_tui.kernels.task import Task


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
