"""Task descriptions (shapes per configuration, XLA cost at production shapes), computed in
worker processes and cached on disk. No jax here: the CLI and the UI read the catalog freely.

A cache entry is keyed by the task's files, the description format, and the jax and libtpu
versions, so editing a task or upgrading jax recomputes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.description import TaskDescription
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.sandbox.policy import XlaCache
from maxkernel_tui.kernels.snapshot import task_digest
from maxkernel_tui.kernels.targets import DEFAULT_TARGET
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.kernels.traced_ties import known_groups, remember
from maxkernel_tui.kernels.workers import (
    jax_worker_env,
    python_module_argv,
    run_requests,
    sandbox_policy,
)

# Of the worker's JSON answer (TaskDescription.to_json): bump when it changes, so cached
# descriptions are redone.
# 2: derived configurations validated, declared flops; 3: inputs timed apart; 4: tie groups,
# held-out traced only; 5: a derived task's coinciding sizes traced apart where untied; 6: sizes
# read through local names (derived shapes of JAXBench's and MaxKernel's unpacked sizes changed),
# sizes of different values a broadcast ties traced together; 7: the reference's exponentials
# counted (the model's XLA time needs them)
FORMAT_VERSION = 7
DESCRIBE_TIMEOUT_S = 600.0  # one task: tracing plus a TPU compile of a large reference


def describe_tasks(
    tasks: Sequence[Task],
    cache_dir: Path,
    *,
    with_cost: bool = True,
    target: str = DEFAULT_TARGET,
    workers: int = 2,
    refresh: bool = False,
    timeout: float = DESCRIBE_TIMEOUT_S,
    on_progress: Callable[[str, TaskDescription], None] | None = None,
    stop: threading.Event | None = None,
) -> dict[str, TaskDescription]:
    """task_id -> description: its configurations' shapes (and cost), or its error. Setting
    `stop` ends the work at once; the tasks not described by then are left out."""
    descriptions: dict[str, TaskDescription] = {}
    missing: dict[str, Task] = {}
    for task in tasks:
        cached = None if refresh else _read_cache(cache_dir, task, with_cost, target)
        if cached is not None:
            descriptions[task.task_id] = cached
            if _traced(task) and known_groups(task, cache_dir) is None:
                remember(task, tuple(tuple(group) for group in cached.tie_groups), cache_dir)
        else:
            missing[str(task.folder)] = task

    def record(folder: str, answer: dict[str, Any]) -> None:
        task = missing[folder]
        described = TaskDescription.from_json(answer)
        described = descriptions[task.task_id] = replace(
            described, task_id=described.task_id or task.task_id
        )
        if described.cacheable:
            _write_cache(cache_dir, task, with_cost, target, described)
        if described.configs and _traced(task):  # loading the task plans with them from now on
            remember(task, tuple(tuple(group) for group in described.tie_groups), cache_dir)
        if on_progress is not None:
            on_progress(task.task_id, described)

    if missing:
        args = ["--target", target] + ([] if with_cost else ["--no-cost"])
        run_requests(
            list(missing),
            python_module_argv("maxkernel_tui.kernels.describe", *args),
            workers=workers,
            timeout=timeout,
            env=jax_worker_env(),
            on_answer=record,
            stop=stop,
            # task code runs there: sandboxed, one process per task, reading its folder and
            # writing its part of the compilation cache (sandbox/policy.py, XlaCache)
            sandbox=lambda folder: sandbox_policy(
                readable=(folder,),
                xla_cache=XlaCache.SHARED,
                xla_scope=task_digest(missing[folder]),
            ),
        )
    return {t.task_id: descriptions[t.task_id] for t in tasks if t.task_id in descriptions}


def _traced(task: Task) -> bool:
    """A derived task whose sizes coincide: the describe worker answers which it ties."""
    derivation = task.derivation
    return derivation is not None and derivation.derived and derivation.coinciding()


def cached_description(
    task: Task, cache_dir: Path, target: str = DEFAULT_TARGET
) -> TaskDescription | None:
    """What the cache already knows about a task, with or without cost; never computes."""
    return _read_cache(cache_dir, task, with_cost=False, target=target)


def described_reference_cost(task: Task, target: str) -> ReferenceCost | None:
    """The reference's XLA cost at production shapes on `target`, from the task's cached
    description in this user's cache (a session describes its task before its first step): the
    profile and the built-in agent's drafts then compile no reference again. None when the
    cache has no such cost (not described yet, another generation, or it did not compile), and
    for a training task, whose kernels are compared with XLA's forward and backward, not with
    the forward the description costs."""
    if task.gradients:
        return None
    described = cached_description(task, cache_dir(), target)
    cost = None if described is None else described.cost
    if cost is None or cost.error or cost.target != target or cost.config != task.configs[0]:
        return None
    return ReferenceCost(
        cost.flops,
        cost.bytes_accessed,
        cost.optimal_seconds,
        transcendentals=cost.transcendentals,
        relayouts=cost.relayouts,
    )


def _read_cache(
    cache_dir: Path, task: Task, with_cost: bool, target: str
) -> TaskDescription | None:
    """A costed entry serves both kinds of request; a cost-free one only cost-free requests."""
    candidates = [True] if with_cost else [True, False]
    for costed in candidates:
        path = _cache_path(cache_dir, task, costed, target)
        try:
            return TaskDescription.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):  # missing, cut short, or not ours
            continue
    return None


def _write_cache(
    cache_dir: Path, task: Task, with_cost: bool, target: str, described: TaskDescription
) -> None:
    path = _cache_path(cache_dir, task, with_cost, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")  # one per writer
    temporary.write_text(json.dumps(described.to_json()))
    temporary.replace(path)  # atomic: a killed process never leaves half an entry


def _cache_path(cache_dir: Path, task: Task, with_cost: bool, target: str) -> Path:
    from maxkernel_tui.versions import (
        installed_version,
    )  # importlib.metadata: not on the UI's start-up path

    digest = hashlib.sha256()
    for part in (
        *(path.read_bytes() for path in task.defining_files),
        f"{FORMAT_VERSION}|{installed_version('jax')}|{installed_version('libtpu')}|{with_cost}|{target}".encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", task.task_id)
    return cache_dir / "describe" / f"{safe_id}-{digest.hexdigest()[:20]}.json"
