"""Where a program's device time goes on a TPU, op by op: the task's reference jitted as written
(and, given kernel files, each kernel's program) traced with `jax.profiler` at the task's bench
shapes, and each XLA op's device time per run (the "XLA Ops" line of the TPU's device plane,
perf/device_trace.op_seconds), named by its compiled HLO (shape and layout), largest first. Measured
(device trace); on a machine without a TPU it says so and stops.

    python benchmarks/device_ops.py TASK [KERNEL.py ...] [--calls 10] [--top 8]

UNSANDBOXED, like measured_v5e.py: kernel files are imported and run directly; for the
project's own built-in agent's kernels on a borrowed benchmark machine only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
from maxkernel_tui.kernels.perf.device_trace import (
    load_events,
    module_name,
    newest_trace,
    op_seconds,
)


def op_times(
    function: Callable[..., Any], args: Sequence[Any], calls: int, name: str
) -> dict[str, Any]:
    """Per-op device milliseconds per run of `function` (jitted under `name`); a TPU names each
    op's event by its compiled HLO (shape, layout, operands)."""
    function.__name__ = name
    program = jax.jit(function)
    jax.block_until_ready(program(*args))  # compiled and warm
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir):
            for _ in range(calls):
                jax.block_until_ready(program(*args))
        xplane = newest_trace(Path(trace_dir))
        events = load_events(xplane) if xplane else []
    runs, per_op = op_seconds(events, module_name(name))
    return {
        "runs": runs,
        "ops": [{"op": op, "ms": round(seconds * 1e3, 4)} for op, seconds in per_op.items()],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("kernels", nargs="*", type=Path)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args(argv)
    if jax.devices()[0].platform != "tpu":
        raise SystemExit("device_ops.py measures on a TPU; this machine has none")
    tasks, _ = load_tasks(builtin_suite_dir())
    task = find_task(args.task, tasks)
    reference, config = runtime.load_reference(task), task.configs[0]
    _, static = runtime.input_specs(task, reference, config)
    inputs = runtime.make_inputs(task, reference, config, 0)[0]
    programs: dict[str, Callable[..., Any]] = {
        "reference": lambda *dynamic: reference.computation(*dynamic, *static)
    }
    for path in args.kernels:
        module = runtime.load_candidate(task, reference, path)
        programs[path.stem] = lambda *dynamic, m=module: m.computation(*dynamic, *static)
    for label, function in programs.items():
        found = op_times(function, inputs, args.calls, re.sub(r"\W", "_", f"ops_{label}"))
        found["ops"] = found["ops"][: args.top]
        print(json.dumps({"task": args.task, "program": label, **found}))


if __name__ == "__main__":
    main()
