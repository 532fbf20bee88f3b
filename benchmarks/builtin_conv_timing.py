"""The built-in agent's convolution kernels timed on a TPU against XLA's reference, at bench
shapes: the kernel as the agent drafts it, and the reference jitted at XLA's default precision
(one bf16 pass for f32 operands), at "high" (three passes) and at "highest". Wall clock around
`block_until_ready`, inputs on the device, median of --calls calls after one warm-up call.
Measured only: on a machine without a TPU it says so and stops.

    python benchmarks/builtin_conv_timing.py [--tasks 18k 22k 39k] [--calls 15]
"""

from __future__ import annotations

import argparse
import contextlib
import types
from collections.abc import Callable
from typing import Any

import jax
from wall_time import median_ms

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks

PRECISIONS = ("default", "high", "highest")


def with_static(computation: Callable[..., Any], static: Any) -> Callable[..., Any]:
    """The task's computation of its dynamic arguments, its static ones bound."""

    def call(*dynamic: Any) -> Any:
        return computation(*dynamic, *static)

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=["18k", "22k", "39k"])
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    if jax.default_backend() != "tpu":
        raise SystemExit("no TPU here: timings on this machine would not be meaningful")
    tasks, _ = load_tasks(builtin_suite_dir())
    print("| task | kernel (measured) | XLA default | XLA high | XLA highest |")
    print("|---|---|---|---|---|")
    for name in args.tasks:
        task = find_task(name, tasks)
        kernel = types.ModuleType("builtin_conv_kernel")
        exec(compile(draft_kernel(task).source, "<draft>", "exec"), kernel.__dict__)
        reference = runtime.load_reference(task)
        dynamic, static = reference.get_inputs("bench", 0)
        dynamic = jax.device_put(dynamic)
        ours = median_ms(jax.jit(with_static(kernel.computation, static)), dynamic, args.calls)
        xla = []
        for precision in PRECISIONS:
            asked = (
                contextlib.nullcontext()
                if precision == "default"
                else jax.default_matmul_precision(precision)
            )
            with asked:
                function = jax.jit(with_static(reference.computation, static))
                xla.append(median_ms(function, dynamic, args.calls))
        cells = [f"{t:.3f} ms ({t / ours:.2f}x)" for t in xla]
        print(f"| {task.task_id} | {ours:.3f} ms | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
