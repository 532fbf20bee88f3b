"""`maxkernel-tui eval KERNEL.py --task TASK`: evaluate one candidate kernel. No jax here.

Exit status 0 when the kernel is accepted, 1 when it is rejected, 2 for a usage or environment
error (a missing file, an unknown task or TPU generation).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from maxkernel_tui.commands.tasks import resolve_kernel_and_task
from maxkernel_tui.config import flag_of
from maxkernel_tui.kernels.evaluation.harness import (
    EvalOptions,
    Harness,
    UsageError,
)
from maxkernel_tui.kernels.evaluation.report import ACCEPTED, format_report
from maxkernel_tui.kernels.evaluation.tiles_plan import default_tile_blocks
from maxkernel_tui.kernels.targets import DEFAULT_TARGET


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "eval",
        help="evaluate a candidate kernel against a task",
        description="Evaluate KERNEL.py (a file defining `computation` with the reference's "
        "signature) against TASK: static checks, trace (Pallas does the heavy work), TPU lowering "
        "and ahead-of-time compile with libtpu, numerics in TPU interpret mode on fresh seeds and "
        "held-out shapes, timing on a real TPU only. Exit 0 accepted, 1 rejected, 2 usage error.",
    )
    parser.add_argument("kernel", type=Path, metavar="KERNEL.py")
    parser.add_argument(
        "--task", required=True, help="built-in task id (or its number, e.g. 12p) or a task folder"
    )
    parser.add_argument(
        flag_of("tpu_target"),
        default=DEFAULT_TARGET,
        metavar="GEN",
        help="TPU generation to compile for: v4, v5e, v5p, v6e or another libtpu knows "
        "(default %(default)s)",
    )
    parser.add_argument("--config", metavar="NAME", help="run numerics on this configuration only")
    parser.add_argument(
        "--seeds",
        type=int,
        default=EvalOptions.seeds,
        help="fresh seeds on the check configuration (default %(default)s, as the workbench and "
        "the agents evaluate)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="limit on everything the kernel does; the process group is killed past it",
    )
    parser.add_argument(
        "--detect-races", action="store_true", help="race detection in TPU interpret mode (slow)"
    )
    parser.add_argument(
        "--tiles",
        type=int,
        default=default_tile_blocks(),
        metavar="N",
        help="sampled production output tiles: N blocks drawn at random besides the corners of "
        "each kernel's output grid (default %(default)s)",
    )
    parser.add_argument(
        "--no-tiles",
        dest="tiles",
        action="store_const",
        const=None,
        help="no sampled production tiles: the verdict then says `checked at small shapes only`",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    task = resolve_kernel_and_task(args.kernel, args.task)
    if args.config is not None and args.config not in task.configs:
        print(
            f"error: task {task.task_id} has no configuration {args.config!r} "
            f"({', '.join(task.configs)})",
            file=sys.stderr,
        )
        return 2
    options = EvalOptions(
        target=args.tpu,
        config=args.config,
        seeds=args.seeds,
        timeout=args.timeout,
        detect_races=args.detect_races,
        tile_blocks=args.tiles,
    )
    with Harness(pool_size=0) as harness:  # one evaluation: no spare worker to start
        try:
            report = harness.evaluate(args.kernel, task, options)
        except UsageError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    print(json.dumps(report.to_json(), indent=1) if args.json else format_report(report))
    return 0 if report.verdict == ACCEPTED else 1
