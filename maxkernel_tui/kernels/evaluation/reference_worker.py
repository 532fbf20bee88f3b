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

import jax

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.outputs import save_outputs
from maxkernel_tui.kernels.evaluation.protocol import NumericsRun, ReferenceAnswer, ReferenceRequest
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import TaskError
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
        try:
            with jax.default_matmul_precision("highest"):
                _, _, output = runtime.run_reference(task, module, config, seed)
            files = save_outputs(Path(request.out_dir), f"reference-{config}-{seed}", output)
            runs.append(NumericsRun(config, seed, files=files))
        except TaskError as error:
            runs.append(NumericsRun(config, seed, error=str(error)))
    return ReferenceAnswer(runs)


def main() -> None:
    print(json.dumps(READY), flush=True)
    for line in sys.stdin:
        if line.strip():
            answer = reference_outputs(ReferenceRequest.from_json(json.loads(line)))
            print(json.dumps(answer.to_json()), flush=True)


if __name__ == "__main__":
    main()
