"""Entry point `maxkernel-tui` and its subcommands. Never imports jax (workers do)."""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

from maxkernel_tui import __version__
from maxkernel_tui.config import ConfigError, add_settings_flags
from maxkernel_tui.kernels.executors.errors import ClusterError
from maxkernel_tui.kernels.task import TaskError
from maxkernel_tui.store import StoreError
from maxkernel_tui.visible import visible, visible_output


def _workbench_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of the command without a subcommand: it opens the workbench."""
    from maxkernel_tui.services.tasks import GRADIENTS_HELP, GRADIENTS_OPTION

    parser.add_argument("--version", action="version", version=f"maxkernel-tui {__version__}")
    parser.add_argument(
        "--task",
        metavar="ID|DIR",
        help="open the workbench on this task (an id, its number, or a "
        "task folder) instead of the task picker",
    )
    parser.add_argument(GRADIENTS_OPTION, metavar="NAME[,NAME]", help=GRADIENTS_HELP)
    parser.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="SESSION",
        help="reopen a session in the workbench: an id or a unique prefix of one "
        "(default: the most recent session)",
    )
    add_settings_flags(parser, ("sandbox",))
    return parser


def build_parser() -> argparse.ArgumentParser:
    from maxkernel_tui.commands import (  # the subcommands' modules: not when the app opens
        bench,
        doctor,
        evaluate,
        export,
        profile,
        run,
        search,
        serve,
        sessions,
        settings,
        tasks,
    )

    parser = _workbench_arguments(
        argparse.ArgumentParser(
            prog="maxkernel-tui",
            description="Terminal workbench for JAX/Pallas TPU kernels, designed with LLM agents. "
            "Without a subcommand, opens the workbench.",
        )
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--path",
        type=Path,
        metavar="DIR",
        help="a folder of task folders in the JaxBench/MaxKernel adapted format "
        "(default: the built-in 50-task suite)",
    )
    tasks.add_parser(commands, where)
    evaluate.add_parser(commands)
    bench.add_parser(commands)
    profile.add_parser(commands)
    run.add_parser(commands)
    search.add_parser(commands)
    sessions.add_parser(commands)
    export.add_parser(commands)
    doctor.add_parser(commands)
    settings.add_parser(commands)
    serve.add_parser(commands)
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; the subcommands' modules (the harness and numpy among their imports, a
    third of a second) are imported only where the line names more than the workbench's own
    arguments, so the workbench's first frame does not wait for them."""
    alone = _workbench_arguments(argparse.ArgumentParser(prog="maxkernel-tui", add_help=False))
    opened, rest = alone.parse_known_args(argv)
    if not rest:
        opened.command = None
        return opened
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.command is None:
        return _run(args)
    # what a command prints comes from kernels, models and task files as often as from us:
    # no control character of theirs reaches the terminal
    with visible_output():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        _choose_sandbox(getattr(args, "sandbox", None))
        if args.command is None:
            return _open_app(args.task, args.resume, args.gradients)
        _stop_on_term_and_hangup()
        return int(args.run(args))
    except (TaskError, ConfigError, StoreError, ClusterError) as error:
        print(f"error: {visible(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP in a command that does not say more
        return 130


def _choose_sandbox(flag: str | None) -> None:
    """The `sandbox` setting (flag, variable or file) reaches every worker through the
    variable, which scrubbed environments keep."""
    from maxkernel_tui.config import load_settings
    from maxkernel_tui.kernels.sandbox.policy import OPT_OUT, OPT_OUT_VARIABLE

    try:
        chosen = load_settings({"sandbox": flag}).sandbox
    except ConfigError:
        return  # the command reports a broken settings file itself (doctor says what is wrong)
    if chosen == OPT_OUT:
        os.environ[OPT_OUT_VARIABLE] = OPT_OUT


def _stop_on_term_and_hangup() -> None:
    """SIGTERM and SIGHUP (an SSH session that drops) stop a command the way Ctrl-C does, so its
    `finally` blocks run: worker processes are killed with their groups, a session is marked
    stopped with its resume command printed. (Workers also end by themselves when their parent
    is gone: kernels/worker_main.py.)"""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)


def _open_app(task_name: str | None, resume: str | None, gradients: str | None = None) -> int:
    from maxkernel_tui.app import MaxKernelApp  # Textual only when the workbench opens
    from maxkernel_tui.config import load_settings
    from maxkernel_tui.services.tasks import resolve_task, with_gradient_option

    if task_name and resume is not None:
        print("error: give --task or --resume, not both", file=sys.stderr)
        return 2
    if gradients is not None and not task_name:
        print("error: --gradients goes with --task (a folder read as it is)", file=sys.stderr)
        return 2
    task = with_gradient_option(resolve_task(task_name), gradients) if task_name else None
    settings = load_settings()
    # resolved before the screen opens: an unknown session is an error on the terminal, exit 2
    session = None
    if resume is not None:
        from maxkernel_tui.services.sessions import resolve_session  # the database: not otherwise

        session = resolve_session(resume, settings.store_path).id
    MaxKernelApp(task=task, settings=settings, resume=session).run()
    _leave_at_once()


def _leave_at_once() -> NoReturn:
    """End the process without the interpreter's teardown, which freed the app's objects for
    over a second of ctrl+q under load (0.3 s to the app's end, 1.7 s to the process's end, at
    load 10, benchmarks/workbench_timings.py). The app has shut down by now; the exit handlers
    run first (fork servers and worker processes killed, temporary files removed), and the
    store has committed every write as it came."""
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
