"""`maxkernel-tui profile KERNEL.py --task TASK`: static analysis, performance model, trace; with
the profile options and on the executor the workbench's ctrl+o and the agents use for the same
settings (kernels.service.setup.EvaluationSetup), through the evaluation service. No jax here."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from maxkernel_tui.commands.agent_flags import add_executor_flags, setup_of
from maxkernel_tui.commands.tasks import add_gradients_flag, resolve_kernel_and_task
from maxkernel_tui.config import cache_dir, flag_of, settings_from_args
from maxkernel_tui.kernels.service.service import EvaluationService, KernelSource
from maxkernel_tui.kernels.service.setup import EvaluationSetup
from maxkernel_tui.kernels.targets import DEFAULT_TARGET, TARGETS


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "profile",
        help="profile a candidate kernel: VMEM, bytes, flops, bound, estimated time, roofline",
        description="Static analysis of the kernel's pallas_calls at production shapes, the TPU "
        "performance model per generation (estimated), XLA's cost of the reference on the same "
        "TPUs, and a trace (device trace on a TPU; host-side trace of an interpret-mode run "
        "elsewhere).",
    )
    parser.add_argument("kernel", type=Path, metavar="KERNEL.py")
    parser.add_argument(
        "--task", required=True, help="built-in task id (or its number) or a task folder"
    )
    add_gradients_flag(parser)
    parser.add_argument(
        flag_of("tpu_target"),
        dest="tpu_targets",
        action="append",
        choices=sorted(TARGETS),
        metavar="GEN",
        help="TPU generation (repeatable; default: the tpu_target setting, "
        f"{DEFAULT_TARGET} unless set, as the workbench and the agents profile; "
        f"known: {', '.join(TARGETS)})",
    )
    add_executor_flags(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def profile_setup(args: argparse.Namespace) -> EvaluationSetup:
    """The setup the workbench and the agents use for the same settings, profiling on the
    generations `--tpu` names in place of the setting's."""
    targets = tuple(args.tpu_targets or ())
    return setup_of(args, settings_from_args(args), profile_targets=targets)


def run(args: argparse.Namespace) -> int:
    task = resolve_kernel_and_task(args.kernel, args.task, args.gradients)
    setup = profile_setup(args)
    setup.executor.prepare()  # a cluster that cannot be used is said first (ClusterError)
    service = EvaluationService(setup, task, cache_dir() / "traces")
    try:
        result = service.profile(KernelSource.read(args.kernel))
    finally:
        service.close()
        setup.executor.release()
    if result.summary is None:
        print(f"error: {result.error}", file=sys.stderr)
        return 1
    summary = result.summary
    print(json.dumps(summary.to_json(), indent=1) if args.json else summary.to_text())
    return 0
