"""`maxkernel-tui profile KERNEL.py --task TASK`: static analysis, performance model, trace.
No jax here."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from maxkernel_tui.commands.tasks import resolve_kernel_and_task
from maxkernel_tui.config import cache_dir, flag_of
from maxkernel_tui.kernels.perf.calibration import default_calibration_file
from maxkernel_tui.kernels.perf.profile import DEFAULT_TARGETS, ProfileError, profile_kernel
from maxkernel_tui.kernels.targets import TARGETS


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
    parser.add_argument(
        flag_of("tpu_target"),
        action="append",
        choices=sorted(TARGETS),
        metavar="GEN",
        help=f"TPU generation (repeatable; default {' and '.join(DEFAULT_TARGETS)}; "
        f"known: {', '.join(TARGETS)})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    task = resolve_kernel_and_task(args.kernel, args.task)
    try:
        summary = profile_kernel(
            args.kernel,
            task,
            targets=tuple(args.tpu or DEFAULT_TARGETS),
            trace_root=cache_dir() / "traces",
            calibration_file=default_calibration_file(),
        )
    except ProfileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(summary.to_json(), indent=1) if args.json else summary.to_text())
    return 0
