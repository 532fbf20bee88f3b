"""The process that computes reference outputs, apart from any candidate. Imports jax.

    python -m maxkernel_tui.kernels.evaluation.reference_worker

Long-lived: one JSON request per line ({"task", "runs": [[config, seed], ...], "out_dir",
"extra_configs": {name: params}}), one JSON answer per line. Matmuls run at the highest
precision jax offers on the device; every other step keeps the reference's own dtypes, since
they are part of the task's semantics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jax

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.outputs import save_outputs
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.kernels.workers import READY


def reference_outputs(request: dict[str, Any]) -> dict[str, Any]:
    try:
        task = load_task(request["task"])
        module = runtime.load_reference(task)
        task = runtime.with_extra_configs(task, module, request.get("extra_configs") or {})
    except TaskError as error:
        return {"error": str(error)}
    runs = []
    for config, seed in request["runs"]:
        run: dict[str, Any] = {"config": config, "seed": seed}
        try:
            with jax.default_matmul_precision("highest"):
                _, _, output = runtime.run_reference(task, module, config, seed)
            run["files"] = save_outputs(
                Path(request["out_dir"]), f"reference-{config}-{seed}", output
            )
        except TaskError as error:
            run["error"] = str(error)
        runs.append(run)
    return {"runs": runs}


def main() -> None:
    print(json.dumps(READY), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(reference_outputs(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
