"""`maxkernel-tui search --task TASK --algorithm parallel|beam|evolve`: a graph search, headless.
No jax here.

Exit status 0 with an accepted kernel (for --suite: on every task), 1 without one, 2 for a usage
error, 3 when the search ended on an error or could not start (its best accepted kernel, if any,
is still written), 130 when stopped by Ctrl-C (the search continues with `--resume`).
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
from maxkernel_tui.store.kinds import SessionStatus

# The search's modules load only when a search runs: the rest of the CLI stays quick to start.


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "search",
        help="graph search over candidate kernels: parallel, beam or evolutionary",
        description="Search over many candidate kernels: each node is an expansion in which the "
        "implementer applies one TPU optimisation strategy to a parent kernel and the harness "
        "judges the result. Nodes are stored as they change; a stopped or killed search "
        "continues with --resume.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--task", metavar="ID|DIR", help="built-in task id (or its number) or a task folder"
    )
    what.add_argument(
        "--suite", metavar="builtin|DIR", help="search every task of a suite, one session each"
    )
    what.add_argument(
        "--resume", metavar="SESSION", help="continue a search (its session id or a prefix)"
    )
    add_gradients_flag(parser)
    parser.add_argument("--algorithm", choices=("parallel", "beam", "evolve"), default="beam")
    parser.add_argument(
        "--width", type=int, default=3, metavar="N", help="parallel lines, or the beam width"
    )
    parser.add_argument(
        "--depth", type=int, default=3, metavar="N", help="rounds (generations) after the root"
    )
    parser.add_argument(
        "--branches", type=int, default=2, metavar="N", help="beam: children per beam node"
    )
    parser.add_argument(
        "--population", type=int, default=6, metavar="N", help="evolve: children per generation"
    )
    parser.add_argument("--islands", type=int, default=2, metavar="N", help="evolve: islands")
    parser.add_argument(
        "--regression-tolerance",
        type=float,
        default=0.0,
        metavar="X",
        help="beam: a child this much (relative) worse than its parent may still enter the beam",
    )
    parser.add_argument(
        "--headroom-floor",
        type=float,
        default=0.95,
        metavar="X",
        help="beam: a kernel estimated at this share of its roofline or more is not expanded "
        "(no headroom the model can see)",
    )
    parser.add_argument(
        "--llm-concurrency", type=int, default=2, metavar="N", help="model calls at a time"
    )
    parser.add_argument(
        "--eval-concurrency", type=int, default=1, metavar="N", help="evaluations at a time"
    )
    parser.add_argument(
        "--seed", type=Path, metavar="FILE", help="a kernel to start from (the root's parent)"
    )
    parser.add_argument(
        "--max-evals", type=int, metavar="N", help="cap on harness evaluations for the search"
    )
    parser.add_argument(
        "--steer",
        action="append",
        default=[],
        metavar="ACTION",
        help="steer the search (repeatable), stored with it and taken up at its next round: "
        "idea@N=TEXT, strategy@N=NAME, expand@N, pin@N, unpin@N, target=TPU, hand@N=FILE "
        "(N: a node's number)",
    )
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="with --resume and --steer: store the steering and exit (a search running in "
        "another process takes it up at its next round)",
    )
    add_model_flags(parser, "search")
    add_rank_by_flag(parser)
    add_executor_flags(parser)
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write the best accepted kernel here (with --suite: a folder, one TASK.py each)",
    )
    parser.add_argument(
        "--graph",
        type=Path,
        metavar="FILE",
        help="write the graph: .dot for Graphviz, else JSON (with --suite: FILE's name plus the "
        "task id)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from maxkernel_tui.agents.search.config import SearchConfig

    if args.task is None and args.suite is None and args.resume is None:
        print("error: give --task, --suite or --resume SESSION", file=sys.stderr)
        return 2
    if args.gradients is not None and args.task is None:
        print("error: --gradients goes with --task (a folder read as it is)", file=sys.stderr)
        return 2
    try:
        config = SearchConfig(
            algorithm=args.algorithm,
            width=args.width,
            depth=args.depth,
            branches=args.branches,
            population=args.population,
            islands=args.islands,
            max_evals=args.max_evals,
            regression_tolerance=args.regression_tolerance,
            headroom_floor=args.headroom_floor,
            llm_concurrency=args.llm_concurrency,
            eval_concurrency=args.eval_concurrency,
            rank_by=args.rank_by,
        )
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = settings_from_args(args)
    try:
        steers = _steers(args)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.no_run:
        return _steer_only(args, settings, steers)
    seed = args.seed.read_text(encoding="utf-8") if args.seed else ""
    try:
        if args.suite is not None:
            return asyncio.run(_suite(args, settings, config, seed))
        task = _task(args.task, args.gradients) if args.task else None
        code, _ = asyncio.run(
            _one(args, settings, config, task, seed, args.out, args.graph, steers=steers)
        )
        return code
    except KeyboardInterrupt:  # asyncio.run re-raises it after the search has stopped
        return 130
    finally:
        setup_of(args, settings).executor.release()


def _steers(args: argparse.Namespace) -> list[Any]:
    """The `--steer` flags as steering actions (a usage error for a --suite search)."""
    if not args.steer:
        return []
    if args.suite is not None:
        raise ValueError("--steer steers one search: give --task or --resume")
    from maxkernel_tui.agents.search.steering import parse_steer

    return [parse_steer(text, lambda path: Path(path).read_text("utf-8")) for text in args.steer]


def _steer_only(args: argparse.Namespace, settings: Any, steers: list[Any]) -> int:
    """Store the steering of the search `--resume` names, and run nothing."""
    from maxkernel_tui.agents.search.steering import give
    from maxkernel_tui.services.sessions import existing_store
    from maxkernel_tui.store.kinds import StoreError

    if args.resume is None or not steers:
        print("error: --no-run stores steering: give --resume SESSION and --steer", file=sys.stderr)
        return 2
    store = existing_store(settings.store_path)
    if store is None:
        print(f"error: no session store at {settings.store_path}", file=sys.stderr)
        return 2
    with store:
        try:
            session = store.find_session(args.resume)
            for steer in steers:
                given = give(store, session.id, steer)
                print(f"steering #{given.id} of {session.id}: {given.words()}", file=sys.stderr)
        except (StoreError, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return 0


def _task(name: str, gradients: str | None = None) -> Any:
    from maxkernel_tui.commands.tasks import resolve_task_option

    return resolve_task_option(name, gradients)


def _printer(args: argparse.Namespace, prefix: str = "") -> Any:
    from maxkernel_tui.agents.search.describe import describe_search

    return event_printer(args.json, prefix, describe_search)


async def _one(
    args: argparse.Namespace,
    settings: Any,
    config: Any,
    task: Any,
    seed: str,
    out: Path | None,
    graph: Path | None,
    prefix: str = "",
    steers: list[Any] | None = None,
) -> tuple[int, Any]:
    """Run one search, given `steers` first; (exit status, outcome or None)."""
    from maxkernel_tui.agents.llm.errors import LLMError
    from maxkernel_tui.agents.orchestration.ending import error_words
    from maxkernel_tui.agents.search.launch import open_search
    from maxkernel_tui.store.db import open_store

    store = open_store(settings.store_path)
    try:
        opened = await open_search(
            store,
            settings,
            task=task,
            config=config,
            resume=args.resume,
            seed=seed,
            listener=_printer(args, prefix),
            setup=setup_of(args, settings),
        )
    except (LLMError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2, None
    except Exception as error:  # the new session is marked failed with this reason
        return ended_on_error(f"could not start: {error_words(error)}"), None
    print(
        f"search session {opened.session_id} ({'resumed' if opened.session.resumed else 'new'}, "
        f"{opened.search.config.algorithm}); store {store.path}",
        file=sys.stderr,
    )
    for steer in steers or []:  # taken up at the search's next round, kept with it for a resume
        try:
            given = opened.search.steer(steer)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            await opened.aclose()
            return 2, None
        print(f"steering #{given.id}: {given.words()}", file=sys.stderr)
    try:
        outcome = await opened.search.run()
    except (asyncio.CancelledError, KeyboardInterrupt) as stop:
        # the search has marked the session stopped
        print(
            f"\nstopped ({type(stop).__name__}); continue with: maxkernel-tui search --resume "
            f"{opened.session_id}",
            file=sys.stderr,
        )
        return 130, None
    finally:
        await opened.aclose()
    if graph is not None:
        _write_graph(opened.search.graph, graph)
    return _finish(outcome, out), (opened.session_id, outcome)


def _write_graph(graph: Any, path: Path) -> None:
    from maxkernel_tui.agents.search.export import to_dot, to_json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_dot(graph) if path.suffix == ".dot" else to_json(graph), encoding="utf-8")


def _finish(outcome: Any, out: Path | None) -> int:
    print(
        f"search ended: {outcome.reason}; {outcome.nodes} nodes, {outcome.evaluations} evaluations",
        file=sys.stderr,
    )
    failed = outcome.status == SessionStatus.FAILED
    if outcome.best is None:
        print("no accepted kernel", file=sys.stderr)
        return ended_on_error(outcome.reason) if failed else 1
    score = outcome.best.score_words()
    # the node, and its kernel version as the log and the store name it
    named = f"#{outcome.best.number} (kernel v{outcome.best_version_number})"
    print(f"best: {named} {outcome.best.strategy}, {score}", file=sys.stderr)
    if out is not None:
        write_best(outcome.best.source, out, named)
    return ended_on_error(outcome.reason) if failed else 0


async def _suite(args: argparse.Namespace, settings: Any, config: Any, seed: str) -> int:
    """Every task of the suite, one search each: one after another locally; on a Ray cluster
    side by side (as many as the cluster has slots), so that every node stays busy."""
    from maxkernel_tui.config import cache_dir
    from maxkernel_tui.kernels.loader import builtin_suite_dir, load_tasks

    suite = builtin_suite_dir() if args.suite == "builtin" else Path(args.suite)
    tasks, errors = load_tasks(suite, cache_dir())
    for error in errors:
        print(f"skipped: {error}", file=sys.stderr)
    executor = setup_of(args, settings).executor
    await asyncio.to_thread(executor.prepare)  # an unusable cluster is said once, up front
    side_by_side = asyncio.Semaphore(executor.slots())

    async def search_task(task: Any) -> tuple[int, Any]:
        out = args.out / f"{task.task_id}.py" if args.out else None
        graph = (
            args.graph.with_name(f"{args.graph.stem}.{task.task_id}{args.graph.suffix}")
            if args.graph
            else None
        )
        async with side_by_side:
            return await _one(
                args, settings, config, task, seed, out, graph, prefix=f"[{task.task_id}] "
            )

    done = await asyncio.gather(*(search_task(task) for task in tasks))
    if any(code == 130 for code, _ in done):
        return 130
    rows = [_summary_row(task.task_id, result) for task, (_, result) in zip(tasks, done)]
    print(summary_table(rows))
    return max((code for code, _ in done), default=0)


def _summary_row(task_id: str, result: Any) -> list[str]:
    if result is None:
        return [task_id, "-", "-", "-", "error", ""]
    session_id, outcome = result
    best = outcome.best
    score = "-" if best is None or best.score is None else f"{best.score:.3g}"
    return [
        task_id,
        session_id,
        str(outcome.nodes),
        str(outcome.evaluations),
        score,
        outcome.score_kind if best else f"no accepted kernel ({outcome.reason})",
    ]


def summary_table(rows: list[list[str]]) -> str:
    """The per-task summary of a suite search, as aligned columns."""
    header = ["task", "session", "nodes", "evals", "best", "kind"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]
    )
