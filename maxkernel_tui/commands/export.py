"""`maxkernel-tui export [SESSION] [--out DIR] [--portability]`: a session's best kernel (by
default the most recently updated session's, into `exports/<session>/` of the data directory) as
a standalone file with its evaluation report in Markdown and its evidence card in Markdown and
JSON (with --portability, its matrix across TPU generations, compiled here with libtpu in worker
processes). No jax here.

The best kernel is the store's one definition (`Store.best_kernel`): the best score among the
session's accepted versions, else its latest accepted version, else its latest version. The files
are named after the task (`<task_id>.py`, `<task_id>.md`), the names `bench --kernels DIR` reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from maxkernel_tui.config import Settings, add_settings_flags, settings_from_args
from maxkernel_tui.services.export import Matrix, export_session
from maxkernel_tui.services.sessions import existing_store, latest_session

if TYPE_CHECKING:
    from maxkernel_tui.kernels.service.portability import PortabilityRow
    from maxkernel_tui.store import Session


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "export",
        help="write a session's best kernel and its evaluation report",
        description="Write the best kernel of SESSION (the best score among its accepted "
        "versions, else its latest accepted version, else its latest version; the report says "
        "which) to DIR as <task_id>.py, with its plan and evaluation report as <task_id>.md.",
    )
    parser.add_argument(
        "session",
        nargs="?",
        default="",
        metavar="SESSION",
        help="session id, or a unique prefix of it (default: the most recently updated session)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="folder to write into, created (default: exports/<session> in the data directory)",
    )
    parser.add_argument(
        "--portability",
        action="store_true",
        help="compile the kernel for v4, v5e, v5p, v6e and tpu7x and estimate it on each, for "
        "its evidence card (slow: a compile per generation, in worker processes)",
    )
    add_settings_flags(parser, ("data_dir",))
    parser.set_defaults(run=run)


def portability_matrix(settings: Settings) -> Matrix:
    """The matrix of a kernel in a session's task, on this machine's workers."""

    def matrix(session: Session, source: str) -> list[PortabilityRow]:
        from maxkernel_tui.config import cache_dir
        from maxkernel_tui.kernels.service.portability import portability
        from maxkernel_tui.kernels.service.service import EvaluationService, KernelSource
        from maxkernel_tui.kernels.service.setup import EvaluationSetup
        from maxkernel_tui.services.tasks import resolve_task, task_argument, traced_task

        task = traced_task(resolve_task(task_argument(session.task_id, session.task_dir)))
        traces = cache_dir() / "traces"
        service = EvaluationService(EvaluationSetup.of(settings), task, traces)
        try:
            return portability(service, KernelSource(source, f"{task.task_id}.py"), traces)
        finally:
            service.close()

    return matrix


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    path = settings.store_path
    store = existing_store(path)
    if store is None:
        print(f"error: no session store at {path}", file=sys.stderr)
        return 2
    with store:
        session = latest_session(store) if not args.session else store.find_session(args.session)
        if not args.session:  # named, so that nobody mistakes which session was written
            print(
                f"session {session.id} ({session.task_id}, {session.mode}, {session.status}): "
                "the most recently updated one",
                file=sys.stderr,
            )
        out = args.out or settings.data_dir / "exports" / session.id
        matrix = portability_matrix(settings) if args.portability else None
        written = export_session(store, session.id, out, matrix)
    for file in written:
        print(file)
    return 0
