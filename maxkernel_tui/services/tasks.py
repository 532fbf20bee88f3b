"""A task named by the engineer: a task folder, or an id (or its number prefix) in a suite. For
the CLI's commands, resume and the workbench's start-up. No jax here."""

from __future__ import annotations

from pathlib import Path

from maxkernel_tui.kernels.loader import builtin_suite_dir, find_task, load_tasks
from maxkernel_tui.kernels.task import Task, TaskError


def resolve_task(name: str, path: Path | None = None) -> Task:
    """A task folder path, or an id (or id number) in `path` or the built-in suite."""
    from maxkernel_tui.kernels.loader import load_task

    if Path(name).is_dir():
        return load_task(name)
    root = path if path is not None else builtin_suite_dir()
    named = (
        [d for d in (root / name, *root.glob(f"{name}_*")) if d.is_dir()] if "/" not in name else []
    )
    if len(named) == 1:  # the usual case: read one task, not the whole suite (start-up time)
        task = load_task(named[0])
        if task.task_id == name or task.task_id.split("_", 1)[0] == name:
            return task
    tasks, errors = load_tasks(root)
    try:
        return find_task(name, tasks)
    except KeyError:
        problems = "".join(f"\n  {e}" for e in errors)
        known = ", ".join(t.task_id for t in tasks[:4])
        raise TaskError(
            path or builtin_suite_dir(), f"no task {name!r} (e.g. {known}){problems}"
        ) from None
