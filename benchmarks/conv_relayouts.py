"""The XLA copies around the built-in agent's convolution kernels, which the performance model
does not count: per task, the kernel the agent drafts is compiled for v5e at bench shapes, and
every copy XLA adds outside the Pallas call (a reshape that merges (height, width) into one lane
axis, or splits it back, is a relayout on a TPU, not a free view) is listed with the bytes it
reads and writes, beside the model's estimate of the kernel alone and XLA's own estimate of the
whole program. Estimates on v5e (ours and XLA's compiler cost model), never measurements.

    JAX_PLATFORMS=cpu python benchmarks/conv_relayouts.py [--tasks 33k 18k]
"""

from __future__ import annotations

import argparse
import os
import re
import types

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # other processes may hold libtpu

import numpy as np

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.agents.builtin.autotune import estimate_source, reference_cost
from maxkernel_tui.kernels import aot
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks

HBM_BYTES_PER_SECOND = 819e9  # v5e
# `%copy.9 = f32[16,64,30,3844]{1,0,3,2:T(8,128)} copy(%x)`: the result's dtype and shape (a
# reshape left in the optimised program is a relayout: the free ones became bitcasts)
_COPY = re.compile(r"%\S+ = (\w+)\[([\d,]*)\]\S* (?:copy|transpose|reshape)\(")


def copied_bytes(hlo: str) -> list[tuple[str, float]]:
    """(the copy's result, bytes read and written, ignoring tile padding) of each copy,
    transpose or reshape in the optimised program."""
    found = []
    for line in hlo.splitlines():
        match = _COPY.search(line)
        if match:
            dtype, dims = match.group(1), [int(d) for d in match.group(2).split(",") if d]
            size = int(np.prod(dims)) * np.dtype(_DTYPES.get(dtype, dtype)).itemsize
            found.append((f"{dtype}{dims}", 2.0 * size))
    return found


_DTYPES = {"f32": "float32", "bf16": "bfloat16", "s32": "int32"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=["33k", "18k"])
    args = parser.parse_args()
    tasks, _ = load_tasks(builtin_suite_dir())
    print(
        "| task | model: kernel | XLA copies outside it | their bytes / HBM rate "
        "| kernel + copies |"
    )
    print("|---|---|---|---|---|")
    for name in args.tasks:
        task = find_task(name, tasks)
        draft = draft_kernel(task)
        kernel = types.ModuleType("drafted_kernel")
        exec(compile(draft.source, f"<{task.task_id}>", "exec"), kernel.__dict__)
        specs, static = runtime.input_specs(task, runtime.load_reference(task), "bench")

        def call(*arrays, module=kernel, bound=static):
            return module.computation(*arrays, *bound)

        compiled = aot.compile_for_tpu(call, list(specs), aot.target_for("v5e"))
        copies = copied_bytes(compiled.as_text())
        copy_ms = sum(b for _, b in copies) / HBM_BYTES_PER_SECOND * 1e3
        model = estimate_source(draft.source, task, reference_cost=reference_cost(task))
        kernel_ms = model.seconds * 1e3
        listed = "; ".join(f"{shape} {b / 1e6:.0f} MB" for shape, b in copies) or "none"
        print(
            f"| {task.task_id} | {kernel_ms:.3f} ms (est.) | {listed} | {copy_ms:.3f} ms (est.) "
            f"| {kernel_ms + copy_ms:.3f} ms (est.) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
