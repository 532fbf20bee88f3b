"""`maxkernel-tui tasks` and `tasks show`: list tasks and print a reference. No jax here."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from maxkernel_tui.commands import task_import
from maxkernel_tui.config import cache_dir
from maxkernel_tui.kernels.description import TaskDescription
from maxkernel_tui.kernels.listing import format_task, task_group, task_record
from maxkernel_tui.kernels.loader import builtin_task_dirs, load_tasks, with_known_ties
from maxkernel_tui.kernels.targets import DEFAULT_TARGET, TARGETS
from maxkernel_tui.kernels.task import Task, TaskError
from maxkernel_tui.services.tasks import (
    GRADIENTS_HELP,
    GRADIENTS_OPTION,
    resolve_task,
    traced_task,
    with_gradient_option,
)
from maxkernel_tui.visible import terminal, visible


def add_parser(commands: Any, where: argparse.ArgumentParser) -> None:
    tasks = commands.add_parser(
        "tasks",
        parents=[where],
        help="list benchmark tasks",
        description="List tasks: id, category, operation, shapes and dtypes per configuration, "
        "and the reference's flops and bytes from XLA's cost analysis at production shapes, "
        "compiled ahead of time for a TPU (libtpu; no TPU needed). Results are cached.",
    )
    tasks.add_argument("--json", action="store_true", help="print JSON instead of text")
    tasks.add_argument("--no-cost", action="store_true", help="skip the TPU compile (shapes only)")
    tasks.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        choices=sorted(TARGETS),
        help="TPU generation to compile for first (default %(default)s); a "
        "reference too large for its HBM moves to a larger generation",
    )
    tasks.add_argument(
        "--refresh", action="store_true", help="recompute instead of using the cache"
    )
    tasks.add_argument(
        "--workers", type=int, default=2, help="worker processes (default %(default)s)"
    )
    tasks.set_defaults(run=list_tasks)
    tasks_commands = tasks.add_subparsers(dest="tasks_command", metavar="show|import")
    show = tasks_commands.add_parser(
        "show",
        parents=[where],
        help="print a task's reference with syntax highlighting",
        description="Print a task's metadata and its reference.py, highlighted on a terminal.",
    )
    show.add_argument("task_id", help="task id, or its number prefix such as 12p")
    show.set_defaults(run=show_task)
    task_import.add_parser(tasks_commands, where)


def add_gradients_flag(parser: argparse.ArgumentParser) -> None:
    """`--gradients NAME[,NAME]`, for every command that judges kernels on a task."""
    parser.add_argument(GRADIENTS_OPTION, metavar="NAME[,NAME]", help=GRADIENTS_HELP)


def resolve_task_option(task_name: str, gradients: str | None = None) -> Task:
    """The task `--task` names, its coinciding sizes traced, judged on the gradients
    `--gradients` names; usage errors as TaskError (exit 2)."""
    return with_gradient_option(traced_task(resolve_task(task_name)), gradients)


def resolve_kernel_and_task(kernel: Path, task_name: str, gradients: str | None = None) -> Task:
    """The task a kernel file is to be checked against (resolve_task_option); usage errors as
    TaskError (exit 2)."""
    if not kernel.is_file():
        raise TaskError(kernel, "no such kernel file")
    return resolve_task_option(task_name, gradients)


def _load(path: Path | None) -> tuple[list[Task], list[TaskError]]:
    """The tasks under `path`, or every built-in group: the 50 JAXBench tasks, then training."""
    tasks: list[Task] = []
    errors: list[TaskError] = []
    for root in (path,) if path is not None else builtin_task_dirs():
        found, problems = load_tasks(root, cache_dir())
        tasks += found
        errors += problems
    return tasks, errors


def list_tasks(args: argparse.Namespace) -> int:
    from maxkernel_tui.kernels.catalog import describe_tasks

    tasks, errors = _load(args.path)
    progress = _Progress() if sys.stderr.isatty() and not args.json else None
    descriptions = describe_tasks(
        tasks,
        cache_dir(),
        with_cost=not args.no_cost,
        target=args.target,
        workers=args.workers,
        refresh=args.refresh,
        on_progress=progress.update if progress else None,
    )
    if progress:
        progress.finish()
    tasks = [
        with_known_ties(t, cache_dir()) for t in tasks
    ]  # planned with the ties describing traced
    described = [(t, descriptions[t.task_id]) for t in tasks]
    failed = [t for t, description in described if description.error is not None]
    if args.json:
        records = [task_record(t, description) for t, description in described]
        print(json.dumps({"tasks": records, "errors": [str(e) for e in errors]}, indent=1))
    else:
        group = None
        for task, description in described:
            if task_group(task) != group and group is not None:
                print(f"\n{task_group(task)}:")
            group = task_group(task)
            print(format_task(task, description))
        for error in errors:
            print(f"error: {error}", file=sys.stderr)
        print(f"{len(described)} tasks, {len(failed) + len(errors)} with errors", file=sys.stderr)
    return 1 if failed or errors else 0


def show_task(args: argparse.Namespace) -> int:
    task = resolve_task(args.task_id, args.path)
    header = (
        f"# {task.task_id}  [{task.category}] {task.operation}\n"
        f"# {task.folder}\n# configurations: {', '.join(task.configs)}; "
        + "; ".join(f"{c}: atol {t.atol:g} rtol {t.rtol:g}" for c, t in task.tolerances.items())
    )
    source = task.reference_path.read_text(encoding="utf-8")
    print(header)
    if sys.stdout.isatty():  # our colours around the task's text, its own controls made visible
        terminal(sys.stdout).write(_highlight(visible(source)))
    else:
        print(source, end="")
    return 0


def _highlight(source: str) -> str:
    from pygments import highlight
    from pygments.formatters import TerminalFormatter
    from pygments.lexers import PythonLexer

    return highlight(source, PythonLexer(), TerminalFormatter())


class _Progress:
    """One updating status line on stderr while workers describe tasks."""

    def __init__(self) -> None:
        self.done = 0

    def update(self, task_id: str, answer: TaskDescription) -> None:
        self.done += 1
        mark = "error" if answer.error is not None else "ok"
        terminal(sys.stderr).write(
            f"\r\033[Kdescribing tasks not in the cache (shapes, AOT TPU compile): "
            f"{self.done} done, last {visible(task_id)} {mark}"
        )
        sys.stderr.flush()

    def finish(self) -> None:
        if self.done:
            terminal(sys.stderr).write("\r\033[K")
