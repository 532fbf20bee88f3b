"""`maxkernel-tui run --task TASK`: a headless session, Auto or HITL on this terminal. No jax here.

Exit status 0 with an accepted kernel, 1 without one, 2 for a usage error, 3 when the session
ended on an error or could not start (its best accepted kernel, if any, is still written), 130
when stopped by Ctrl-C (the session can be resumed with `--resume`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from maxkernel_tui.commands.agent_flags import (
    add_executor_flags,
    add_model_flags,
    add_rank_by_flag,
    ended_on_error,
    event_printer,
    setup_of,
    write_best,
)
from maxkernel_tui.commands.tasks import add_gradients_flag
from maxkernel_tui.config import settings_from_args
from maxkernel_tui.store.kinds import Mode, SessionStatus

# The engine's modules load only when a session runs: the rest of the CLI stays quick to start.


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "run",
        help="run a session headless: Auto, or HITL at this terminal",
        description="Run the agents on TASK: plan, implement, test (debugging failures), profile, "
        "autotune, iteration after iteration. Every event is stored as it happens; a stopped "
        "session continues with --resume without paying again for stored model answers.",
    )
    parser.add_argument(
        "--task", metavar="ID|DIR", help="built-in task id (or its number) or a task folder"
    )
    add_gradients_flag(parser)
    parser.add_argument(
        "--mode",
        choices=(Mode.AUTO, Mode.HITL),
        default=Mode.AUTO,
        help="auto: every proposal approved; hitl: you decide at each gate (default auto)",
    )
    parser.add_argument("--max-iterations", type=int, default=3, metavar="N")
    parser.add_argument(
        "--patience",
        type=int,
        default=2,
        metavar="N",
        help="Auto stops after N iterations without a significant improvement",
    )
    parser.add_argument(
        "--target-speedup", type=float, metavar="X", help="stop once the best score reaches X"
    )
    parser.add_argument(
        "--tune-candidates",
        type=int,
        default=6,
        metavar="N",
        help="settings of the tunables the autotuner estimates per iteration (default 6)",
    )
    add_model_flags(parser, "session")
    add_rank_by_flag(parser)
    add_executor_flags(parser)
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="write the best accepted kernel here"
    )
    parser.add_argument(
        "--resume", metavar="SESSION", help="continue a stopped session (its id or a prefix)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from maxkernel_tui.agents.orchestration.engine import LoopLimits
    from maxkernel_tui.commands.tasks import resolve_task_option

    if (args.task is None) == (args.resume is None):
        print(
            "error: give --task for a new session or --resume SESSION to continue one",
            file=sys.stderr,
        )
        return 2
    if args.max_iterations < 1:
        print("error: --max-iterations must be at least 1", file=sys.stderr)
        return 2
    settings = settings_from_args(args)
    if args.mode == Mode.HITL and not sys.stdin.isatty():
        print(
            "error: --mode hitl asks at each gate and needs a terminal; use --mode auto",
            file=sys.stderr,
        )
        return 2
    if args.gradients is not None and args.task is None:
        print("error: --gradients goes with --task (a folder read as it is)", file=sys.stderr)
        return 2
    task = resolve_task_option(args.task, args.gradients) if args.task else None
    limits = LoopLimits(
        max_iterations=args.max_iterations,
        patience=args.patience,
        target_score=args.target_speedup,
        tune_candidates=args.tune_candidates,
        rank_by=args.rank_by,
    )
    try:
        return asyncio.run(_session(args, settings, task, limits))
    except KeyboardInterrupt:  # asyncio.run re-raises it after the session has stopped cleanly
        return 130


def _gates(mode: Mode) -> Any:
    from maxkernel_tui.agents.orchestration.gates import AutoGate

    if mode == Mode.HITL:
        from maxkernel_tui.commands.terminal_gate import TerminalGate

        return TerminalGate()
    return AutoGate()


async def _session(args: argparse.Namespace, settings: Any, task: Any, limits: Any) -> int:
    from maxkernel_tui.agents.llm.errors import LLMError
    from maxkernel_tui.agents.orchestration.ending import error_words
    from maxkernel_tui.agents.orchestration.session import open_session
    from maxkernel_tui.store.db import open_store

    store = open_store(settings.store_path)
    try:
        opened = await open_session(
            store,
            settings,
            task=task,
            mode=Mode(args.mode),  # argparse gives the word
            gates=_gates,
            limits=limits,
            resume=args.resume,
            listener=event_printer(args.json),
            setup=setup_of(args, settings),
        )
    except (LLMError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # the new session is marked failed with this reason
        return ended_on_error(f"could not start: {error_words(error)}")
    print(
        f"session {opened.session_id} ({'resumed' if opened.resumed else 'new'}); store "
        f"{store.path}",
        file=sys.stderr,
    )
    try:
        outcome = await opened.engine.run()
    except (asyncio.CancelledError, KeyboardInterrupt, EOFError) as stop:
        # the engine has marked the session stopped
        print(
            f"\nstopped ({type(stop).__name__}); continue with: maxkernel-tui run --resume "
            f"{opened.session_id}",
            file=sys.stderr,
        )
        return 130
    finally:
        await opened.aclose()
        setup_of(args, settings).executor.release()
    return _finish(outcome, args.out)


def _finish(outcome: Any, out: Path | None) -> int:
    if outcome.best is not None and out is not None:
        write_best(outcome.best.source, out, f"v{outcome.best.number}")
    if outcome.status == SessionStatus.FAILED:
        return ended_on_error(outcome.reason)
    if outcome.best is None:
        print(f"no accepted kernel ({outcome.reason})", file=sys.stderr)
        return 1
    return 0
