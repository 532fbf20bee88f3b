"""Validation of edge-case input configurations a tester proposes. No jax in this process.

A proposal is a name and the parameters of the task's `CONFIGS` (e.g. `{"batch": 2, "seq": 40,
"hidden": 512}`). It becomes an extra check configuration only when: the name is a plain
identifier (it ends up in file names), the keys are the `check` configuration's, every value is a
positive int at most `MAX_SCALE` times the check value (so it stays CPU-sized), and, in a jax
worker (`edge_worker`), the reference runs on it within a time limit with finite outputs and its
arrays keep the TPU tiling the check shapes had (a last dim that was a multiple of 128 stays one,
a second-last that was a multiple of 8 stays one): an edge case probes a kernel's handling of
sizes, not shapes no TPU kernel is expected to take.
"""

from __future__ import annotations

import ast
import json
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maxkernel_tui.codec import JsonData
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.sandbox.policy import XlaCache
from maxkernel_tui.kernels.snapshot import TaskSnapshot, snapshot_task
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.workers import (
    LineWorker,
    WorkerFailure,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

EdgeConfig = tuple[str, dict[str, int]]

EDGE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_SCALE = 4  # each dimension at most this many times the check value
REFERENCE_TIME_LIMIT_S = 60.0
_WORKER = "maxkernel_tui.kernels.edge_worker"
_LANE, _SUBLANE = 128, 8


def check_params(task: Task) -> dict[str, Any] | None:
    """The `check` entry of reference.py's CONFIGS, read statically (no task code runs here);
    None when the task has none or it is not a literal."""
    if not task.named_configs or CHECK not in task.configs:
        return None
    if task.derived and task.derivation is not None:  # plain/JAXBench: derived, not declared
        return dict(task.derivation.sizes[CHECK])
    try:
        module = ast.parse(task.reference_path.read_text(encoding="utf-8"))
        for node in module.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "CONFIGS" for t in node.targets
            ):
                params = ast.literal_eval(node.value).get(CHECK)
                return dict(params) if isinstance(params, dict) else None
    except (OSError, SyntaxError, ValueError, AttributeError):
        return None
    return None


def param_problems(params: Any, check: dict[str, Any]) -> list[str]:
    """What is wrong with `params` against the check configuration's parameters."""
    if not isinstance(params, dict):
        return [f"params must be a mapping of the check configuration's keys {sorted(check)}"]
    problems = []
    missing, unknown = sorted(set(check) - set(params)), sorted(set(params) - set(check))
    if missing or unknown:
        problems.append(
            f"keys must be the check configuration's {sorted(check)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unknown {unknown}" if unknown else "")
        )
    for key in sorted(set(params) & set(check)):
        value, limit = params[key], check[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(f"{key}={value!r} is not a positive int")
        elif not isinstance(limit, int) or isinstance(limit, bool):
            if value != limit:
                problems.append(
                    f"{key} is not an integer size in the check configuration; keep {limit!r}"
                )
        elif value > MAX_SCALE * limit:
            problems.append(f"{key}={value} exceeds {MAX_SCALE}x the check value {limit}")
    if not problems and params == check:
        problems.append("same as the check configuration")
    return problems


def tile_problems(
    check_shapes: Sequence[Sequence[int]], edge_shapes: Sequence[Sequence[int]]
) -> list[str]:
    """Arrays (inputs then outputs, in order) whose TPU-tile-friendly dims lost that property."""
    if [len(s) for s in check_shapes] != [len(s) for s in edge_shapes]:
        return ["the arrays' number or ranks differ from the check configuration's"]
    problems = []
    for n, (check, edge) in enumerate(zip(check_shapes, edge_shapes)):
        for axis, unit, what in ((-1, _LANE, "last"), (-2, _SUBLANE, "second-last")):
            if len(check) >= -axis and check[axis] % unit == 0 and edge[axis] % unit:
                problems.append(
                    f"array {n} {list(edge)}: {what} dim {edge[axis]} is not a multiple of {unit} "
                    f"(the check shape {list(check)} keeps TPU tiles)"
                )
    return problems


def validate_edge_configs(
    task: Task, proposals: Iterable[tuple[str, Any]], *, time_limit: float = REFERENCE_TIME_LIMIT_S
) -> tuple[list[EdgeConfig], list[str]]:
    """(accepted (name, params), one reason per rejected proposal). The reference runs in a jax
    worker process, never here; a proposal that hangs it is killed and rejected."""
    proposals = list(proposals)
    if not proposals:
        return [], []
    if not task.named_configs or CHECK not in task.configs:
        reason = (
            f"{task.task_id}: get_inputs takes no named configurations with a `check` one: "
            "no extra configurations"
        )
        return [], [reason]
    accepted: list[EdgeConfig] = []
    rejected: list[str] = []
    seen: set[str] = set()
    pending = []
    for name, params in proposals:
        if not isinstance(name, str) or not EDGE_NAME.match(name):
            rejected.append(
                f"{name!r}: the name must be lowercase letters, digits and _ (at most 40)"
            )
        elif name in seen or name in task.configs:
            rejected.append(f"{name}: the name is already taken")
        else:
            seen.add(name)
            pending.append((name, params))
    if pending:
        with tempfile.TemporaryDirectory(prefix="mkt-edge-task-") as copies:
            # the worker reads a snapshot: the ties the harness plans the task with travel in it
            snapshot = snapshot_task(task, Path(copies))
            for name, params, problem in _judged(snapshot, pending, time_limit):
                if problem is None:
                    accepted.append((name, dict(params)))
                else:
                    rejected.append(f"{name}: {problem}")
    return accepted, rejected


def _judged(
    snapshot: TaskSnapshot, pending: list[tuple[str, Any]], time_limit: float
) -> list[tuple[str, Any, str | None]]:
    """Each pending proposal with why the edge worker finds it unfit (None: fit)."""
    # the task's own code runs there: sandboxed, writing its task's part of the cache
    folder = snapshot.task.folder
    policy = sandbox_policy(
        readable=(folder,), xla_cache=XlaCache.SHARED, xla_scope=snapshot.digest
    )
    worker = LineWorker(python_module_argv(_WORKER), jax_worker_env(), sandbox=policy)
    try:
        return [
            (name, params, _ask_worker(worker, EdgeRequest(str(folder), name, params, time_limit)))
            for name, params in pending
        ]
    finally:
        worker.close()


@dataclass(frozen=True)
class EdgeRequest(JsonData):
    """One proposal for the edge worker; it answers {} when fit, else {"reason": ...}."""

    task: str  # the task's folder
    name: str
    params: Any  # the proposal's parameters, as the tester gave them
    time_limit: float  # seconds the reference may take on it


def _ask_worker(worker: LineWorker, request: EdgeRequest) -> str | None:
    try:
        line = json.dumps(request.to_json())
    except (TypeError, ValueError) as error:  # params that JSON cannot carry
        return f"params are not plain JSON: {error}"
    try:
        # the worker times the reference itself; the margin covers tracing and making the inputs
        answer = worker.ask(line, timeout=2 * request.time_limit + 30)
    except WorkerFailure as failure:
        return f"the reference did not finish: {failure}"
    return answer.get("reason")
