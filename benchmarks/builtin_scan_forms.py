"""The decayed-scan kernels the built-in agent can write, side by side on the performance
model (estimated, TPU v5e): the quadratic form over chunk pairs (what the agent proposes) and,
where a fixed-size state carries the scan, the one-pass carried-state form (which the harness's
work floor refuses: it does far fewer matmul flops than the reference's quadratic form). Each
form autotuned on the model; XLA's estimate of the reference beside them where it compiles for
the target (16p's does not: its (4, 64, 4096, 4096) f32 intermediates exceed v5e's HBM).

    JAX_PLATFORMS=cpu python benchmarks/builtin_scan_forms.py [--tasks 15p 16p] [FOLDER ...]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

from maxkernel_tui.agents.builtin.autotune import (
    DEFAULT_TARGET,
    autotune,
    estimate_source,
    reference_cost,
)
from maxkernel_tui.agents.builtin.draft import retention_plans
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.program import trace_program
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_task, load_tasks
from maxkernel_tui.kernels.task import Task


def rows(task: Task, label: str) -> list[str]:
    cost = reference_cost(task)
    lines = []
    for plan in retention_plans(trace_program(task), carried_state=True):
        try:
            tuned = autotune(plan.render, task, plan.start, plan.knobs, DEFAULT_TARGET)
        except CannotPlan as problem:
            lines.append(f"| {label} | {plan.family} | - | - | {problem} |")
            continue
        found = estimate_source(plan.render(tuned.best), task, reference_cost=cost)
        xla = found.vs_xla.short() if found.vs_xla else "no XLA estimate (does not compile)"
        setting = ", ".join(f"{k}={getattr(tuned.best, k)}" for k in plan.knobs)
        lines.append(
            f"| {label} | {plan.family} | {found.seconds * 1e3:.3f} ms | {xla} | {setting} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--tasks", nargs="*", default=["15p", "16p"])
    args = parser.parse_args()
    suite, _ = load_tasks(builtin_suite_dir())
    labelled = [(find_task(name, suite), find_task(name, suite).task_id) for name in args.tasks]
    labelled += [(load_task(folder), str(folder)) for folder in args.folders]
    print(f"| task | form | est. {DEFAULT_TARGET} time | est. vs XLA | tunables |")
    print("|---|---|---|---|---|")
    for task, label in labelled:
        print("\n".join(rows(task, label)), flush=True)


if __name__ == "__main__":
    main()
