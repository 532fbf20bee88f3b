"""The built-in agent's attention kernels against XLA and against the task's expert, estimated by
the performance model on v5e and v6e at the bench shapes.

    JAX_PLATFORMS=cpu python benchmarks/builtin_attention.py [--tasks 1p 2p 4p] [--tune]

For each task: the kernel the agent drafts for each generation (its block sizes chosen by the
model for that generation with --tune, else the defaults), the model's time for it, XLA's time
for the reference (perf/xla_model.py, at XLA's default precision, as the reference is written)
and the expert's (the suite's expert.py: jax's Pallas kernel with JAXBench's tuned blocks).
Every figure is an estimate; nothing runs on a TPU. Imports jax.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.autotune import estimate_source, reference_cost
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks

TARGETS = ("v5e", "v6e")


def rows(task_ids: list[str], tune: bool) -> list[str]:
    tasks, _ = load_tasks(builtin_suite_dir())
    lines = [
        "| task | target | kernel est. | XLA est. | vs XLA | expert est. | vs expert | blocks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task_id in task_ids:
        task = find_task(task_id, tasks)
        for target in TARGETS:
            draft = draft_kernel(task, tune=tune, target=target)
            kernel = estimate_source(draft.source, task, target, reference_cost(task, target))
            expert = (
                estimate_source(task.expert_path.read_text(), task, target)
                if task.expert_path
                else None
            )
            blocks = " ".join(
                line.split(" = ")[1] for line in draft.source.splitlines() if line[:6] == "BLOCK_"
            )
            xla = kernel.reference_seconds
            lines.append(
                f"| {task.task_id} | {target} | {kernel.seconds * 1e3:.2f} ms | "
                + (f"{xla * 1e3:.2f} ms | {xla / kernel.seconds:.2f}x | " if xla else "- | - | ")
                + (
                    f"{expert.seconds * 1e3:.2f} ms | {expert.seconds / kernel.seconds:.2f}x | "
                    if expert
                    else "- | - | "
                )
                + f"{blocks} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["1p", "2p", "4p"])
    parser.add_argument("--tune", action="store_true", help="block sizes chosen by the model")
    args = parser.parse_args()
    print("\n".join(rows(args.tasks, args.tune)))


if __name__ == "__main__":
    main()
