"""What `run` and `search` share: the model and budget flags, the settings they make, the event
printer (text or JSON lines), and writing the best kernel."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from maxkernel_tui.config import Settings, load_settings


def add_model_flags(parser: argparse.ArgumentParser, scope: str) -> None:
    """--provider, --model, --tpu, --budget-usd, --budget-tokens and --json; `scope` names what the
    budget caps ("session", "search")."""
    parser.add_argument(
        "--provider", help="LLM provider: builtin, gemini, openai, replay (default: configured)"
    )
    parser.add_argument("--model", help="model name for the provider")
    parser.add_argument("--tpu", metavar="GEN", help="TPU generation to compile and estimate for")
    parser.add_argument(
        "--budget-usd", type=float, metavar="X", help=f"hard cap on dollars for the {scope}"
    )
    parser.add_argument(
        "--budget-tokens", type=int, metavar="N", help=f"hard cap on tokens for the {scope}"
    )
    parser.add_argument("--json", action="store_true", help="stream events as JSON lines")


def settings_from(args: argparse.Namespace) -> Settings:
    return load_settings(
        {
            "provider": args.provider,
            "model": args.model,
            "tpu_target": args.tpu,
            "budget_dollars": args.budget_usd,
            "budget_tokens": args.budget_tokens,
        }
    )


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
        if line is not None:
            print(prefix + line, flush=True)

    return show


def write_best(source: str, out: Path, label: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(source, encoding="utf-8")
    print(f"best accepted kernel {label} written to {out}", file=sys.stderr)
