"""`maxkernel-tui config`: every setting, its value and where it came from. No jax here.

Sources, lowest priority first: default, file (the TOML config file), env (MAXKERNEL_TUI_*),
flag. API keys come only from the environment and are shown as "set" or "not set".
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from maxkernel_tui.config import (
    GEMINI_BASE_URL_VARIABLE,
    SPECS,
    VERTEX_VARIABLES,
    Settings,
    SourceKind,
    Spec,
    add_settings_flags,
    display_value,
    mask_url,
    secret_status,
    settings_from_args,
)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "config",
        help="show every setting and where it comes from",
        description="Show every setting, its value and its source: default, file (the TOML "
        "config file: MAXKERNEL_TUI_CONFIG, else $XDG_CONFIG_HOME/maxkernel-tui/config.toml), "
        "env (MAXKERNEL_TUI_<NAME>) or flag. API keys are read only from the environment and "
        "shown as set / not set.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_settings_flags(parser)
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class ShownSetting:
    """One setting as `config --json` shows it: its value (a URL's password masked), where it
    came from, and the variable and flag that may set it."""

    value: Any
    source: SourceKind
    where: str
    env: str | None
    flag: str | None


def shown_setting(settings: Settings, spec: Spec) -> ShownSetting:
    value = getattr(settings, spec.name)
    if spec.name == "base_url" and value is not None:
        value = mask_url(value)
    elif spec.name == "data_dir":
        value = str(value)
    source = settings.source(spec.name)
    env = spec.env_name if spec.env else None
    return ShownSetting(value, source.kind, source.where, env, spec.flag)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    environment = _gemini_environment()
    if args.json:
        print(json.dumps(_report(settings, environment), indent=1))
    else:
        _print_text(settings, environment)
    return 0


def _gemini_environment() -> dict[str, str | None]:
    """The Gemini client's variables that are not secret (a base URL's password masked)."""
    environment = {
        name: os.environ.get(name) for name in (*VERTEX_VARIABLES, GEMINI_BASE_URL_VARIABLE)
    }
    if base_url := environment.get(GEMINI_BASE_URL_VARIABLE):
        environment[GEMINI_BASE_URL_VARIABLE] = mask_url(base_url)
    return environment


def _report(settings: Settings, environment: dict[str, str | None]) -> dict[str, Any]:
    return {
        "config_file": str(settings.config_file),
        "config_file_exists": settings.config_file.is_file(),
        "settings": {spec.name: asdict(shown_setting(settings, spec)) for spec in SPECS},
        "secrets": secret_status(),
        "environment": environment,
        "store": str(settings.store_path),
        "warnings": list(settings.warnings),
    }


def _print_text(settings: Settings, environment: dict[str, str | None]) -> None:
    state = "read" if settings.config_file.is_file() else "not present"
    print(f"config file: {settings.config_file} ({state})")
    rows = [("SETTING", "VALUE", "SOURCE")]
    rows += [
        (
            spec.name,
            display_value(spec.name, getattr(settings, spec.name)),
            str(settings.source(spec.name)),
        )
        for spec in SPECS
    ]
    print(_table(rows))
    print(f"session store: {settings.store_path}")
    print("\nAPI keys (environment only; values never shown):")
    print(_table(list(secret_status().items()), indent="  "))
    print("Gemini client environment:")
    print(_table([(name, value or "not set") for name, value in environment.items()], indent="  "))
    for warning in settings.warnings:
        print(f"warning: {warning}")


def _table(rows: Sequence[tuple[str, ...]], indent: str = "") -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows
    )
