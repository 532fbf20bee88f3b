"""The process that computes reference outputs, apart from any candidate. Imports jax.

    python -m maxkernel_tui.kernels.evaluation.reference_worker

Long-lived: one JSON request per line (a `ReferenceRequest`), one JSON answer per line (a
`ReferenceAnswer`; evaluation/protocol.py). Matmuls run at the highest
precision jax offers on the device; every other step keeps the reference's own dtypes, since
they are part of the task's semantics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.jaxpr_work import measure
from maxkernel_tui.kernels.evaluation.outputs import save_outputs
from maxkernel_tui.kernels.evaluation.production_checks import REFERENCE_FLOPS_BUDGET
from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, ReferenceAnswer, ReferenceRequest
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.kernels.workers import READY


def reference_outputs(request: ReferenceRequest) -> ReferenceAnswer:
    try:
        task = load_task(request.task)
        module = runtime.load_reference(task)
        task = runtime.with_extra_configs(task, module, request.extra_configs)
    except TaskError as error:
        return ReferenceAnswer(error=str(error))
    runs = []
    for config, seed in request.runs:
        if (config, seed) in request.with_inputs:
            runs.append(_with_inputs(task, module, config, seed, Path(request.out_dir)))
            continue
        try:
            with jax.default_matmul_precision("highest"):
                _, _, output = runtime.run_reference(task, module, config, seed)
            files = save_outputs(Path(request.out_dir), f"reference-{config}-{seed}", output)
            runs.append(NumericsRun(config, seed, files=files))
        except TaskError as error:
            runs.append(NumericsRun(config, seed, error=str(error)))
    return ReferenceAnswer(runs)


def _with_inputs(task: Task, module: Any, config: str, seed: int, out_dir: Path) -> NumericsRun:
    """The reference's outputs and the inputs they were computed on, within the CPU budget
    (production_checks.REFERENCE_FLOPS_BUDGET)."""
    try:
        specs, static = runtime.input_specs(task, module, config)
        traced = jax.make_jaxpr(lambda *d: module.computation(*d, *static))(*specs)
    except Exception as error:
        return NumericsRun(config, seed, error=f"the reference does not trace: {error}")
    flops = measure(traced).xla_flops
    if flops > REFERENCE_FLOPS_BUDGET:
        return NumericsRun(
            config,
            seed,
            error=f"the reference at production shapes needs {flops:.3g} matmul flops, over "
            f"the CPU budget of {REFERENCE_FLOPS_BUDGET:.0g} (a TPU runs them in full)",
        )
    try:
        with jax.default_matmul_precision("highest"):
            dynamic, _, output = runtime.run_reference(task, module, config, seed)
    except TaskError as error:
        return NumericsRun(config, seed, error=str(error))
    files = save_outputs(out_dir, f"reference-{config}-{seed}", output)
    inputs = []
    for index, leaf in enumerate(jax.tree.leaves(dynamic)):
        # raw bytes: the reader views them as the input's dtype (bf16 has no .npy type)
        array = np.asarray(leaf)
        path = out_dir / f"input-{config}-{seed}-{index}.npy"
        np.save(path, array.view(f"V{array.dtype.itemsize}"))
        inputs.append(str(path))
    return NumericsRun(config, seed, files=files, inputs=inputs)


def main() -> None:
    print(json.dumps(READY), flush=True)
    for line in sys.stdin:
        if line.strip():
            answer = reference_outputs(ReferenceRequest.from_json(json.loads(line)))
            print(json.dumps(answer.to_json()), flush=True)


if __name__ == "__main__":
    main()
