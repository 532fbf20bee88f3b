"""What `run`, `search`, `bench`, `eval` and `profile` share: the model and budget flags (from the
settings table), the executor flags (`--ray`, `--ray-insecure`) and the evaluation setup built
from them, the event printer (text or JSON lines), and writing the best kernel. No jax."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from maxkernel_tui.config import add_settings_flags
from maxkernel_tui.kernels.perf.vs_xla import XlaBaseline
from maxkernel_tui.kernels.service.setup import EvaluationSetup

MODEL_SETTINGS = ("provider", "model", "tpu_target", "budget_dollars", "budget_tokens")

# The exit status of `run` and `search` when the session ended on an error (or could not start):
# apart from 1 (it ran and accepted nothing), so that a script can tell a fault from a result.
ENDED_ON_ERROR = 3


def add_model_flags(parser: argparse.ArgumentParser, scope: str) -> None:
    """The flags of `MODEL_SETTINGS` (--provider, --model, --tpu, --budget-usd, --budget-tokens,
    from the settings table) and --json; `scope` names what the budget caps ("session",
    "search"). `config.settings_from_args` reads them back."""
    add_settings_flags(parser, MODEL_SETTINGS, scope)
    parser.add_argument("--json", action="store_true", help="stream events as JSON lines")


def add_rank_by_flag(parser: argparse.ArgumentParser) -> None:
    """`--rank-by tolerance|as-written`: which estimated speedup over XLA kernels are ranked by
    (kernels/perf/vs_xla.py); the other is shown beside it."""
    parser.add_argument(
        "--rank-by",
        type=XlaBaseline,
        choices=list(XlaBaseline),
        default=XlaBaseline.TOLERANCE,
        help="rank kernels by their estimated speedup over XLA at the MXU passes the task's "
        "tolerance needs (tolerance, the default) or over XLA running the reference as written "
        "(as-written); both are shown",
    )


def add_executor_flags(parser: argparse.ArgumentParser) -> None:
    """`--ray ADDRESS|local` (a setting: also `[executor] ray` in the config file) and the
    per-command `--ray-insecure`, never stored."""
    add_settings_flags(parser, ("ray",))
    parser.add_argument(
        "--ray-insecure",
        action="store_true",
        help="connect to a Ray cluster without token authentication: anyone who can reach its "
        "ports can then run code on its nodes and read what is sent there",
    )


def setup_of(args: argparse.Namespace, settings: Any, **overrides: Any) -> EvaluationSetup:
    """The `EvaluationSetup` of a command's settings and flags (`overrides`: the options its own
    flags set), built where the workbench's and the agents' is."""
    insecure = getattr(args, "ray_insecure", False)
    return EvaluationSetup.of(settings, insecure=insecure, **overrides)


def event_printer(
    as_json: bool, prefix: str = "", describe_more: Callable[[Any], str | None] | None = None
) -> Callable[[Any], None]:
    """Prints each event as it is stored: a JSON line, or its one-line description."""
    from maxkernel_tui.agents.orchestration.describe import describe

    def show(event: Any) -> None:
        if as_json:
            print(json.dumps({"kind": event.kind, **event.payload()}), flush=True)
            return
        line = (describe_more(event) if describe_more else None) or describe(event)
        if line is not None:  # a description may go on over indented lines: each prefixed
            print("\n".join(prefix + part for part in line.splitlines()), flush=True)

    return show


def ended_on_error(reason: str) -> int:
    """Says that the session ended on an error, and why; the exit status that says so."""
    print(f"the session ended on an error: {reason}", file=sys.stderr)
    return ENDED_ON_ERROR


def write_best(source: str, out: Path, label: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(source, encoding="utf-8")
    print(f"best accepted kernel {label} written to {out}", file=sys.stderr)
