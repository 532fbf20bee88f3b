"""Worker that judges one proposed edge-case configuration per request line. Imports jax.

    python -m maxkernel_tui.kernels.edge_worker

Request: an `EdgeRequest` (edge_configs.py); answer: {} when the configuration is fit to be an
extra check configuration, else {"reason": "..."}.
`edge_configs.validate_edge_configs` is the caller; see its module for the rules.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import jax
import numpy as np

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.edge_configs import EdgeRequest, param_problems, tile_problems
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.kernels.worker_reply import reply
from maxkernel_tui.kernels.workers import READY


def judge(request: EdgeRequest) -> str | None:
    """Why the proposal is not fit to be an extra check configuration, or None when it is."""
    name, params = request.name, request.params
    try:
        task = load_task(request.task)
        module = runtime.load_reference(task)
        check = dict(module.CONFIGS[CHECK])
        problems = param_problems(params, check)
        if problems:
            return "; ".join(problems)
        check_shapes = _shapes(task, module, CHECK)
        task = runtime.with_extra_configs(task, module, {name: params})
        problems = tile_problems(check_shapes, _shapes(task, module, name))
        if problems:
            return "; ".join(problems)
        started = time.perf_counter()
        _, _, output = runtime.run_reference(task, module, name, seed=0)
        seconds = time.perf_counter() - started
    except TaskError as error:
        return error.problem
    if seconds > request.time_limit:
        return f"the reference took {seconds:.1f} s, over the {request.time_limit:.0f} s limit"
    if not all(
        np.isfinite(np.asarray(leaf, dtype=np.float64)).all() for leaf in jax.tree.leaves(output)
    ):
        return "the reference's outputs are not finite on it"
    return None


def _shapes(task: Any, module: Any, config: str) -> list[tuple[int, ...]]:
    specs, _, outputs = runtime.io_specs(task, module, config)
    return [tuple(s.shape) for s in (*specs, *outputs)]


def main() -> None:
    reply(READY)
    for line in sys.stdin:
        if line.strip():
            try:
                reason = judge(EdgeRequest.from_json(json.loads(line)))
            # a proposal that breaks the reference is a rejection, not a crash of the worker
            except Exception as error:
                reason = f"{type(error).__name__}: {str(error)[:300]}"
            reply({} if reason is None else {"reason": reason})


if __name__ == "__main__":
    main()
