"""A task named by the engineer: a task folder, or an id (or its number prefix) in a suite; and a
task named back to the engineer, by its folder unless it is built in (a folder may share its id
with a built-in task). For the CLI's commands, resume, exports, listings and the workbench.
No jax here."""

from __future__ import annotations

import hashlib
from pathlib import Path

from maxkernel_tui.kernels.loader import (
    builtin_suite_dir,
    builtin_task_dirs,
    find_task,
    load_tasks,
)
from maxkernel_tui.kernels.task import Task, TaskError


def resolve_task(name: str, path: Path | None = None) -> Task:
    """A task folder path, or an id (or id number) in `path` or the built-in suite, planned with
    the ties describing it traced (in the user's cache). A name
    written as a path (`/` in it, or a leading `.` or `~`) is a folder only: the error says
    what is wrong with it, not which ids exist."""
    from maxkernel_tui.config import cache_dir
    from maxkernel_tui.kernels.loader import load_task

    folder = Path(name).expanduser()
    if folder.is_dir() or _written_as_path(name):
        return resolve_folder(name)
    roots = (path,) if path is not None else builtin_task_dirs()
    named = [d for root in roots for d in (root / name, *root.glob(f"{name}_*")) if d.is_dir()]
    if len(named) == 1:  # the usual case: read one task, not the whole suite (start-up time)
        task = load_task(named[0], cache=cache_dir())
        if task.task_id == name or task.task_id.split("_", 1)[0] == name:
            return task
    tasks, errors = [], []
    for root in roots:
        found, problems_here = load_tasks(root, cache_dir())
        tasks += found
        errors += problems_here
    try:
        return find_task(name, tasks)
    except KeyError:
        problems = "".join(f"\n  {e}" for e in errors)
        known = ", ".join(t.task_id for t in tasks[:4])
        raise TaskError(
            path or builtin_suite_dir(),
            f"no task {name!r}: no task here has that id (e.g. {known}), and there is no "
            f"folder {str(folder.absolute())!r}{problems}",
        ) from None


def resolve_folder(typed: str) -> Task:
    """The task folder at `typed` (~ expanded), planned with the ties describing it traced;
    TaskError saying what is wrong: no such folder, a file, or a folder that holds no task."""
    from maxkernel_tui.config import cache_dir
    from maxkernel_tui.kernels.loader import load_task

    return load_task(Path(typed).expanduser(), cache=cache_dir())


GRADIENTS_OPTION = "--gradients"
ALL_GRADIENTS = "all"  # every floating-point array input of computation
GRADIENTS_HELP = (
    "judge the gradients of these parameters of the reference's computation too (NAME[,NAME], "
    f"or `{ALL_GRADIENTS}`: every floating-point array input; the candidate is then a "
    "jax.custom_vjp whose backward is Pallas); replaces the task's own `gradients`"
)


def with_gradient_option(task: Task, option: str | None) -> Task:
    """`task` judged on the gradients `--gradients` names (a folder read as it is, without
    editing it); `task` itself without the option. TaskError naming the option where a name is
    not one of computation's parameters."""
    if option is None:
        return task
    from maxkernel_tui.kernels.loader import computation_parameters, gradient_names, parse_python

    parameters = computation_parameters(parse_python(task.reference_path), task.entry_points)
    if option.strip() == ALL_GRADIENTS and ALL_GRADIENTS not in parameters:
        return task.with_gradients(_floating_inputs(task, parameters))
    names = gradient_names(Path(GRADIENTS_OPTION), option, parameters)
    if not names:
        raise TaskError(Path(GRADIENTS_OPTION), "names no parameter (e.g. --gradients x,w)")
    return task.with_gradients(names)


def _floating_inputs(task: Task, parameters: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters of computation that take floating-point arrays at production shapes, from
    the task's description (its inputs' types, found by the sandboxed describe worker, cached)."""
    from maxkernel_tui.config import cache_dir
    from maxkernel_tui.kernels.catalog import describe_tasks

    option = Path(GRADIENTS_OPTION)
    description = describe_tasks([task], cache_dir(), with_cost=False, workers=1)[task.task_id]
    shapes = description.configs.get(task.configs[0])
    if description.error is not None or shapes is None:
        raise TaskError(option, f"`all` needs the inputs' types: {description.error}")
    if len(parameters) - len(shapes.static) != len(shapes.inputs):
        raise TaskError(
            option, "`all`: computation's inputs are not one array per parameter; name them"
        )
    floating = tuple(
        name
        for name, spec in zip(parameters, shapes.inputs)
        if spec.dtype.startswith(("float", "bfloat"))
    )
    if not floating:
        raise TaskError(option, "`all`: computation takes no floating-point array")
    return floating


def _written_as_path(name: str) -> bool:
    return "/" in name or name.startswith((".", "~"))


def traced_task(task: Task) -> Task:
    """`task` planned with the ties tracing its reference finds: a derived task whose sizes
    coincide in production (m = n) and was never described is described first (shapes only,
    in a sandboxed worker, cached by the digest of its files), so that its held-out sizes part
    where the reference allows before anything is judged on them."""
    from maxkernel_tui.config import cache_dir
    from maxkernel_tui.kernels.catalog import describe_tasks
    from maxkernel_tui.kernels.loader import with_known_ties
    from maxkernel_tui.kernels.traced_ties import known_groups

    derivation = task.derivation
    if derivation is None or not derivation.derived or not derivation.coinciding():
        return task
    if known_groups(task, cache_dir()) is None:
        describe_tasks([task], cache_dir(), with_cost=False, workers=1)
    return with_known_ties(task, cache_dir())


def is_builtin(folder: str | Path) -> bool:
    """The folder is one of the built-in tasks (the suite's or the training group's)."""
    return bool(str(folder)) and Path(folder).resolve().parent in {
        root.resolve() for root in builtin_task_dirs()
    }


def task_argument(task_id: str, task_dir: str | Path) -> str:
    """What `--task` takes to name exactly this task again: the id of a built-in task, else its
    folder (a task folder may share its id with a built-in task, or with another folder)."""
    return task_id if not str(task_dir) or is_builtin(task_dir) else str(task_dir)


def task_label(task_id: str, task_dir: str | Path) -> str:
    """The task as a listing shows it: the id, and the folder unless it is built in."""
    return task_id if not str(task_dir) or is_builtin(task_dir) else f"{task_id} ({task_dir})"


def workbench_name(task: Task) -> str:
    """The task's folder under the workbench directory: its id when built in, else its id and a
    digest of its folder's path, so that two tasks with one id never share a kernel file."""
    if is_builtin(task.folder):
        return task.task_id
    digest = hashlib.sha256(str(task.folder.resolve()).encode()).hexdigest()[:8]
    return f"{task.task_id}-{digest}"
