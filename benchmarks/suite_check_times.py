"""How long each built-in reference takes on the CPU on its `check` and `heldout` shapes.

The `check` configuration promises a reference that runs on a CPU in well under 2 s. This
measures it: per task, the first call (trace + XLA compile + run) and the median of 5 warm runs,
on this machine, side by side in one process. Writes benchmarks/results/suite_check_times.md.

    JAX_PLATFORMS=cpu python benchmarks/suite_check_times.py
"""

from __future__ import annotations

import os
import pathlib
import platform
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_tasks

RESULTS = pathlib.Path(__file__).parent / "results" / "suite_check_times.md"


def time_config(task, module, config: str) -> tuple[float, float]:
    dynamic, static = runtime.make_inputs(task, module, config)
    fn = runtime.jitted_reference(module, len(dynamic), len(static))
    start = time.perf_counter()
    jax.block_until_ready(fn(*dynamic, *static))
    first = time.perf_counter() - start
    warm = []
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(fn(*dynamic, *static))
        warm.append(time.perf_counter() - start)
    return first, statistics.median(warm)


def main() -> None:
    tasks, _ = load_tasks(builtin_suite_dir())
    rows = []
    for task in tasks:
        module = runtime.load_reference(task)
        check = time_config(task, module, "check")
        heldout = time_config(task, module, "heldout")
        rows.append((task.task_id, *check, *heldout))
        print(
            f"{task.task_id:<58} check {check[0]:6.2f}s / {check[1] * 1e3:7.1f} ms   "
            f"heldout {heldout[0]:6.2f}s / {heldout[1] * 1e3:7.1f} ms",
            flush=True,
        )
    slowest = max(rows, key=lambda r: r[1])
    lines = [
        "# Built-in references on the CPU (measured)",
        "",
        f"Measured by `benchmarks/suite_check_times.py` on {platform.node()} "
        f"({os.cpu_count()} cores, jax {jax.__version__}, {jax.default_backend()}); first call = "
        "trace + compile + run, warm = median of 5 runs. Shared machine: compare rows, not "
        "absolute values.",
        "",
        f"Slowest first call on `check`: {slowest[0]} {slowest[1]:.2f} s. "
        f"Sum of first calls on `check`: {sum(r[1] for r in rows):.1f} s.",
        "",
        "| task | check first (s) | check warm (ms) | heldout first (s) | heldout warm (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r[0]} | {r[1]:.2f} | {r[2] * 1e3:.1f} | {r[3]:.2f} | {r[4] * 1e3:.1f} |" for r in rows
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
