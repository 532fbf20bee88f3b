"""Where a built-in kernel's time goes on a TPU: the kernel file timed whole at its task's bench
shapes, and again with named helpers of the file replaced by no-ops (their work left out, the
rest as it was), so the difference is what those helpers cost on the device.

    python benchmarks/kernel_parts.py TASK KERNEL.py [--drop NAME[,NAME...] ...] [--calls 20]

Each `--drop` is one variant: e.g. `--drop _epilogue_in_blocks` times the convolution without
its epilogue, `--drop _convolve_planes` the epilogue on an unwritten sum. The outputs of a
variant are garbage; only its time means something. Prints JSON: each variant's median wall
time (ms, after a compile call; dispatch included, the same in every variant).

UNSANDBOXED, like measured_v5e.py: for the project's own built-in agent's kernels on a borrowed
benchmark machine only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.wall_time import median_ms
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


def time_variant(
    task: Any, kernel: Path, dropped: Sequence[str], inputs: Any, static: Any, calls: int
) -> float:
    """The median wall time (ms) of the kernel program with `dropped` helpers made no-ops (a
    fresh module per variant, so no variant sees another's no-ops)."""
    module = runtime.load_candidate(task, runtime.load_reference(task), kernel)
    for name in dropped:
        if not callable(getattr(module, name, None)):
            raise SystemExit(f"{kernel.name} has no function {name}")
        setattr(module, name, _nothing)
    program = jax.jit(lambda *dynamic: module.computation(*dynamic, *static))
    return median_ms(program, inputs, calls)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("kernel", type=Path)
    parser.add_argument("--drop", action="append", default=[], help="comma-separated names")
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    tasks, _ = load_tasks(builtin_suite_dir())
    task = find_task(args.task, tasks)
    reference, config = runtime.load_reference(task), task.configs[0]
    _, static = runtime.input_specs(task, reference, config)
    inputs = runtime.make_inputs(task, reference, config, 0)[0]  # made once, for every variant
    variants = {"whole": [], **{names: names.split(",") for names in args.drop}}
    times = {
        name: round(time_variant(task, args.kernel, dropped, inputs, static, args.calls), 4)
        for name, dropped in variants.items()
    }
    print(json.dumps({"task": args.task, "kernel": args.kernel.name, "ms": times}))


if __name__ == "__main__":
    main()
