"""The built-in agent's training kernels (forward and backward, custom_vjp) against XLA's
gradient of the reference, at the training tasks' production shapes.

    python benchmarks/builtin_training.py [--tasks 1t 4t] [--no-tune]      # estimates
    python benchmarks/builtin_training.py --measure                       # on a TPU

For each task: the kernel the agent drafts (block sizes chosen by the performance model on its
forward-and-backward estimate, unless --no-tune), the model's time for its forward and backward
and XLA's for the reference's (perf/xla_model.py from XLA's cost analysis of the reference's
jax.vjp compiled for v5e): estimated, on any machine. With --measure, on a TPU: both jitted
forward-and-backward programs timed on the device (wall clock around block_until_ready, median
of 20 after 3 warm-ups; measured), and the kernel's output and gradients compared with the
reference's at production shapes (max |diff| and whether within the task's tolerances), with
the block sizes of the estimates' run (RESULTS), so that the TPU machine compiles no estimate.
Imports jax.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import statistics
import sys
import time
import types

if "--measure" not in sys.argv:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.draft import plan_task
from maxkernel_tui.agents.builtin.training_estimate import forward_and_backward
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_training_dir, find_task, load_tasks

RESULTS = pathlib.Path(__file__).parent / "results" / "builtin_training.jsonl"


def _median_seconds(function, arguments, repeats=20):
    for _ in range(3):
        jax.block_until_ready(function(*arguments))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function(*arguments))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(task, source):
    """Device timings of both programs and the kernel's largest differences at bench shapes."""
    module = types.ModuleType("draft")
    exec(compile(source, "<draft>", "exec"), module.__dict__)
    reference = runtime.load_reference(task)
    dynamic, static = runtime.make_inputs(task, reference, "bench", seed=0)
    wanted = [reference.computation.__code__.co_varnames.index(n) for n in task.gradients]
    kernel = jax.jit(forward_and_backward(module.computation, static, wanted))
    xla = jax.jit(forward_and_backward(reference.computation, static, wanted))
    shape = jax.eval_shape(lambda *d: reference.computation(*d, *static), *dynamic)
    cotangent = jax.random.normal(jax.random.key(1), shape.shape, jnp.float32).astype(shape.dtype)
    arguments = (*dynamic, cotangent)
    (out, grads), (want, want_grads) = kernel(*arguments), xla(*arguments)
    meta = yaml.safe_load(task.yaml_path.read_text())
    tolerance = task.tolerance("bench")
    results = {"output": _compared(out, want, tolerance.atol, tolerance.rtol)}
    for name, grad, expected in zip(task.gradients, grads, want_grads, strict=True):
        results[name] = _compared(grad, expected, meta["grad_atol"], meta["grad_rtol"])
    return {
        "kernel_ms": _median_seconds(kernel, arguments) * 1e3,
        "xla_ms": _median_seconds(xla, arguments) * 1e3,
        "compared": results,
    }


def _compared(got, want, atol, rtol):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return {
        "max_abs_diff": float(np.max(np.abs(got - want))),
        "within_tolerance": bool(np.allclose(got, want, atol=atol, rtol=rtol)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", nargs="*", default=["1t", "2t", "3t", "4t"])
    parser.add_argument("--no-tune", action="store_true")
    parser.add_argument("--measure", action="store_true", help="time and compare on a TPU")
    args = parser.parse_args()
    tasks, _ = load_tasks(builtin_training_dir())
    if args.measure:
        estimated = {r["task"]: r for r in map(json.loads, RESULTS.read_text().splitlines())}
        for task_id in args.tasks:
            task = find_task(task_id, tasks)
            plan = plan_task(task)[0]
            record = dict(estimated[task.task_id], measured_on=jax.devices()[0].device_kind)
            source = plan.render(Tunables(**record["tunables"]))
            try:
                record.update(measure(task, source), basis_measured="measured: wall clock, median")
            except Exception as error:  # one task's failure is a result too; the others still run
                record.update(error=f"{type(error).__name__}: {str(error)[:500]}")
            print(json.dumps(record), flush=True)
        return 0
    for task_id in args.tasks:
        task = find_task(task_id, tasks)
        draft = draft_kernel(task, tune=not args.no_tune, target="v5e")
        found = draft.estimate
        record = {
            "task": task.task_id,
            "family": draft.family,
            "tunables": dataclasses.asdict(draft.tunables),
            "estimated_ms": round(found.seconds * 1e3, 3),
            "xla_gradient_estimated_ms": found.reference_seconds
            and round(found.reference_seconds * 1e3, 3),
            "estimated_speedup": found.speedup and round(found.speedup, 2),
            "bound": str(found.bound),
            "basis": "estimated: the v5e performance model, forward and backward",
        }
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
