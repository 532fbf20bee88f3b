"""The static figures of every kernel we hold, at its task's bench shapes: the model's analysis
and estimate on v5e (perf/pallas_analysis.py, perf/model.py) and the work rules' counts
(evaluation/work/kernel_work.py, jaxpr_work.py), one JSON line per kernel, to compare before
and after a change to how the jaxpr is walked.

    JAX_PLATFORMS=cpu python benchmarks/kernel_figures.py [--drafts] > figures.jsonl

Kernels: the honest ones under tests/data/kernels/honest, the built-in suite's expert kernels
and, with --drafts, the built-in agent's untuned draft for every task it can plan. Traced
only, nothing runs; the estimate has no reference cost (no XLA compile).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

import jax

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure
from maxkernel_tui.kernels.evaluation.work.kernel_work import measure_shapes
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
from maxkernel_tui.kernels.perf.model import estimate, minimal_io_bytes
from maxkernel_tui.kernels.perf.outside import outside_traffic
from maxkernel_tui.kernels.perf.pallas_analysis import analyze
from maxkernel_tui.kernels.targets import TARGETS
from maxkernel_tui.kernels.task import Task

HONEST = Path(__file__).resolve().parents[1] / "tests" / "data" / "kernels" / "honest"


def figures(name: str, source: str, task: Task) -> dict[str, Any]:
    """The analysis, estimate and work count of one kernel file at bench shapes."""
    module = types.ModuleType("kernel_figures_candidate")
    exec(compile(source, name, "exec"), module.__dict__)
    reference = runtime.load_reference(task)
    config = task.configs[0]
    specs, static, outputs = runtime.io_specs(task, reference, config)

    def candidate(*dynamic: Any) -> Any:
        return module.computation(*dynamic, *static)

    def computed(*dynamic: Any) -> Any:
        return reference.computation(*dynamic, *static)

    traced = jax.make_jaxpr(candidate)(*specs)
    kernels = analyze(traced)
    model = estimate(
        kernels,
        TARGETS["v5e"],
        None,
        io_bytes=minimal_io_bytes(specs, outputs),
        outside=outside_traffic(traced),
    )
    work = measure_shapes(config, candidate, computed, specs)
    return {
        "kernel": name,
        "analysis": [dataclasses.asdict(k) for k in kernels],
        "estimate": dataclasses.asdict(model),
        "work": dataclasses.asdict(work),
        "heavy_work": dataclasses.asdict(measure(traced)),
        "reference_heavy_work": dataclasses.asdict(measure(jax.make_jaxpr(computed)(*specs))),
    }


def sources(tasks: list[Task], drafts: bool) -> list[tuple[str, str, Task]]:
    found = [
        (f"honest/{path.name}", path.read_text(), find_task(path.stem.split("_")[0], tasks))
        for path in sorted(HONEST.glob("*.py"))
    ]
    for task in tasks:
        if task.expert_path is not None:
            found.append((f"expert/{task.task_id}", task.expert_path.read_text(), task))
    if drafts:
        from maxkernel_tui.agents.builtin import CannotPlan, draft_kernel

        for task in tasks:
            try:
                found.append((f"draft/{task.task_id}", draft_kernel(task, tune=False).source, task))
            except CannotPlan:
                continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafts", action="store_true", help="the built-in agent's drafts too")
    args = parser.parse_args()
    tasks, _ = load_tasks(builtin_suite_dir())
    for name, source, task in sources(tasks, args.drafts):
        try:
            line = figures(name, source, task)
        except Exception as error:  # a kernel this script cannot trace: said, not hidden
            line = {"kernel": name, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(line, sort_keys=True, default=str), flush=True)
        print(name, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
