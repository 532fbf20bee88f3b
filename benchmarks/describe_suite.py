"""Cold `maxkernel-tui tasks`: every reference traced and compiled ahead of time for TPU.

Describes the 50 built-in tasks with an empty cache (2 worker processes, as the CLI does) and
records the wall time, each task's TPU compile time and target, and XLA's estimates.
Writes benchmarks/results/describe_suite.md.

    python benchmarks/describe_suite.py
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time

from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.description import XlaCost
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_tasks

RESULTS = pathlib.Path(__file__).parent / "results" / "describe_suite.md"


def main() -> None:
    tasks, _ = load_tasks(builtin_suite_dir())
    start = time.perf_counter()
    described = describe_tasks(
        tasks, pathlib.Path(tempfile.mkdtemp(prefix="mkt-describe-")), workers=2
    )
    wall = time.perf_counter() - start
    rows = []
    for task_id, description in described.items():
        cost = description.cost or XlaCost(error="no cost")
        if description.error is not None or cost.error is not None:
            rows.append(f"| {task_id} | error | | | | {description.error or cost.error} |")
            continue
        moved = ", ".join(f"{d.target}: {d.reason[:90]}" for d in cost.did_not_fit)
        gflop, gbytes = (cost.flops or 0.0) / 1e9, (cost.bytes_accessed or 0.0) / 1e9
        rows.append(
            f"| {task_id} | {cost.target} | {cost.compile_seconds or 0.0:.1f} | {gflop:,.1f} | "
            f"{gbytes:,.2f} | {moved} |"
        )
    lines = [
        "# Describing the built-in suite from a cold cache "
        "(measured wall time; XLA figures estimated)",
        "",
        f"`benchmarks/describe_suite.py` on a shared {os.cpu_count()}-core machine, 2 worker "
        f"processes: **{wall:.0f} s** wall for {len(tasks)} tasks. Compile seconds are measured "
        "in the worker; "
        "GFLOP and GB are XLA's cost-analysis estimates for the reference at production shapes.",
        "",
        "| task | TPU target | compile (s) | GFLOP (est.) | GB accessed (est.) | did not fit |",
        "|---|---|---:|---:|---:|---|",
        *rows,
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
