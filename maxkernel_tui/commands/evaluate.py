"""`maxkernel-tui eval KERNEL.py --task TASK`: evaluate one candidate kernel, with the options
and on the executor the workbench and the agents use for the same settings
(kernels.service.setup.EvaluationSetup), through the evaluation service. No jax here.

Exit status 0 when the kernel is accepted, 1 when it is rejected, 2 for a usage or environment
error (a missing file, an unknown task or TPU generation).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from maxkernel_tui.commands.agent_flags import add_executor_flags, setup_of
from maxkernel_tui.commands.tasks import add_gradients_flag, resolve_kernel_and_task
from maxkernel_tui.config import cache_dir, flag_of, settings_from_args
from maxkernel_tui.kernels.report.checks import ACCEPTED, format_report
from maxkernel_tui.kernels.service.service import (
    EvaluationService,
    Harness,
    KernelSource,
    ProfileResult,
    UsageError,
)
from maxkernel_tui.kernels.service.setup import (
    DEFAULT_TILE_BLOCKS,
    TILE_BLOCKS_VARIABLE,
    EvalOptions,
    EvaluationSetup,
)
from maxkernel_tui.kernels.targets import DEFAULT_TARGET


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "eval",
        help="evaluate a candidate kernel against a task",
        description="Evaluate KERNEL.py (a file defining `computation` with the reference's "
        "signature) against TASK: static checks, trace (Pallas does the heavy work), TPU lowering "
        "and ahead-of-time compile with libtpu, numerics in TPU interpret mode on fresh seeds and "
        "held-out shapes, timing on a real TPU only. Exit 0 accepted, 1 rejected, 2 usage error. "
        "Without flags it evaluates as the workbench's ctrl+e and the agents do: the same "
        "options, on the executor the settings name.",
    )
    parser.add_argument("kernel", type=Path, metavar="KERNEL.py")
    parser.add_argument(
        "--task", required=True, help="built-in task id (or its number, e.g. 12p) or a task folder"
    )
    add_gradients_flag(parser)
    parser.add_argument(
        flag_of("tpu_target"),
        dest="tpu_target",
        metavar="GEN",
        help="TPU generation to compile for: v4, v5e, v5p, v6e or another libtpu knows "
        f"(default: the tpu_target setting, {DEFAULT_TARGET} unless set)",
    )
    parser.add_argument("--config", metavar="NAME", help="run numerics on this configuration only")
    parser.add_argument(
        "--seeds",
        type=int,
        help=f"fresh seeds on the check configuration (default {EvalOptions.seeds}, as the "
        "workbench and the agents evaluate)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="limit on everything the kernel does; the process group is killed past it "
        f"(default {EvalOptions.timeout:g})",
    )
    parser.add_argument(
        "--detect-races", action="store_true", help="race detection in TPU interpret mode (slow)"
    )
    parser.add_argument(
        "--tiles",
        type=int,
        metavar="N",
        help="sampled production output tiles: N blocks drawn at random besides the corners of "
        f"each kernel's output grid (default {DEFAULT_TILE_BLOCKS}, or {TILE_BLOCKS_VARIABLE})",
    )
    parser.add_argument(
        "--no-tiles",
        action="store_true",
        help="no sampled production tiles: the verdict then says `checked at small shapes only`",
    )
    add_executor_flags(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def evaluation_setup(args: argparse.Namespace) -> EvaluationSetup:
    """The setup the workbench and the agents use for the same settings, with the options this
    command's flags name in place of theirs."""
    given: dict[str, Any] = {
        name: value
        for name, value in (
            ("config", args.config),
            ("seeds", args.seeds),
            ("timeout", args.timeout),
            ("tile_blocks", args.tiles),
        )
        if value is not None
    }
    if args.detect_races:
        given["detect_races"] = True
    if args.no_tiles:
        given["tile_blocks"] = None
    return setup_of(args, settings_from_args(args), **given)


def run(args: argparse.Namespace) -> int:
    task = resolve_kernel_and_task(args.kernel, args.task, args.gradients)
    if args.config is not None and args.config not in task.configs:
        print(
            f"error: task {task.task_id} has no configuration {args.config!r} "
            f"({', '.join(task.configs)})",
            file=sys.stderr,
        )
        return 2
    setup = evaluation_setup(args)
    setup.executor.prepare()  # a cluster that cannot be used is said first (ClusterError)
    kernel = KernelSource.read(args.kernel)  # read once: the workers are given this text
    # one evaluation: no spare worker to start
    with Harness(pool_size=0) as harness:
        service = EvaluationService(setup, task, cache_dir() / "traces", harness=lambda: harness)
        try:
            report = service.evaluate(kernel)
            # an acceptance says how fast the model thinks it is (profile's estimate, no run)
            against_xla = (
                _against_xla(service.profile(kernel, estimate_only=True), setup)
                if report.verdict == ACCEPTED
                else None
            )
        except UsageError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        finally:
            service.close()
            setup.executor.release()
    if args.json:
        print(json.dumps(dict(report.to_json(), estimate=against_xla), indent=1))
    else:
        print(format_report(report) + (f"\n  estimate: {against_xla}" if against_xla else ""))
    return 0 if report.verdict == ACCEPTED else 1


def _against_xla(result: ProfileResult, setup: EvaluationSetup) -> str:
    target = setup.options.target
    if result.summary is None:
        return f"against XLA on TPU {target}: not estimated ({result.error})"
    return result.summary.against_xla(target)
