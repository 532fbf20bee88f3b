"""`maxkernel-tui tasks import FILE --function NAME --out DIR ...`. No jax in this process.

The detected importer translates the file; the shared writer derives check/heldout, validates
the reference in a worker and writes the folder (kernels/importers/).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from maxkernel_tui.config import add_settings_flags, settings_from_args
from maxkernel_tui.kernels.importers import ImportOptions
from maxkernel_tui.kernels.importers.service import import_task
from maxkernel_tui.kernels.listing import config_label, format_spec
from maxkernel_tui.kernels.task import TaskImportError


def add_parser(tasks_commands: Any, where: argparse.ArgumentParser) -> None:
    parser = tasks_commands.add_parser(
        "import",
        parents=[where],
        help="turn a JAX function, a PyTorch module or a CUDA/Triton kernel into a task folder",
        description="Turn a function of yours into a task folder in our format: production "
        "shapes become `bench`, `check` and `heldout` are derived from their sizes, the "
        "reference is validated in a worker before anything is written.",
    )
    parser.add_argument("file", type=Path, help="the Python file that defines the function")
    parser.add_argument("--function", help="the function to import (default: the only one)")
    parser.add_argument("--out", type=Path, required=True, help="the task folder to write")
    parser.add_argument(
        "--args",
        help='dynamic inputs by shape, e.g. "bf16[8,4096,8192] f32[8192]" (default: the '
        "file's own get_inputs())",
    )
    parser.add_argument(
        "--static",
        action="append",
        default=[],
        help="a static argument as a Python literal, after the arrays (repeatable)",
    )
    parser.add_argument(
        "--tolerance",
        type=_tolerance,
        help="ATOL,RTOL (default by dtype: 1e-2 for 16-bit floats, else 1e-3)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --out folder")
    # CUDA and Triton files (and modules the offline translator refuses) go to the porter agent.
    add_settings_flags(parser, ("provider", "model"))
    parser.set_defaults(run=run_import)


def _tolerance(text: str) -> tuple[float, float]:
    try:
        atol, rtol = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not ATOL,RTOL (two numbers)") from None
    return atol, rtol


def run_import(args: argparse.Namespace) -> int:
    # The porter's LLM client and the engine's modules load only when a task is imported.
    from maxkernel_tui.agents.porting import task_importers
    from maxkernel_tui.commands.port_review import approve_on_terminal

    options = ImportOptions(
        function=args.function,
        args=args.args,
        static=tuple(s for text in args.static for s in text.split()),
        tolerance=args.tolerance,
    )
    try:
        written = import_task(
            args.file,
            args.out,
            options,
            force=args.force,
            importers=task_importers(settings_from_args(args), approve_on_terminal),
        )
    except TaskImportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {written.folder} (from a {written.kind})")
    for name, shapes in written.description.configs.items():
        inputs = " ".join(format_spec(s) for s in shapes.inputs)
        print(f"  {config_label(written.task, name):<18} {inputs}")
    for note in written.notes:
        print(f"  note: {note}")
    return 0
