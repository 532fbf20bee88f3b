"""`maxkernel-tui config`: every setting, its value and where it came from. No jax here.

Sources, lowest priority first: default, file (the TOML config file), env (MAXKERNEL_TUI_*),
flag. API keys come only from the environment and are shown as "set" or "not set".
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any

from maxkernel_tui.config import (
    GEMINI_BASE_URL_VARIABLE,
    SPECS,
    VERTEX_VARIABLES,
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


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    secrets = secret_status()
    environment = {
        name: os.environ.get(name) for name in (*VERTEX_VARIABLES, GEMINI_BASE_URL_VARIABLE)
    }
    if base_url := environment.get(GEMINI_BASE_URL_VARIABLE):
        environment[GEMINI_BASE_URL_VARIABLE] = mask_url(base_url)
    if args.json:
        values = {}
        for spec in SPECS:
            value = getattr(settings, spec.name)
            if spec.name == "base_url" and value is not None:
                value = mask_url(value)
            source = settings.source(spec.name)
            values[spec.name] = {
                "value": str(value) if spec.name == "data_dir" else value,
                "source": source.kind,
                "where": source.where,
                "env": spec.env_name if spec.env else None,
                "flag": spec.flag,
            }
        print(
            json.dumps(
                {
                    "config_file": str(settings.config_file),
                    "config_file_exists": settings.config_file.is_file(),
                    "settings": values,
                    "secrets": secrets,
                    "environment": environment,
                    "store": str(settings.store_path),
                    "warnings": list(settings.warnings),
                },
                indent=1,
            )
        )
        return 0
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
    print(_table([(name, status) for name, status in secrets.items()], indent="  "))
    print("Gemini client environment:")
    print(
        _table(
            [(name, value if value else "not set") for name, value in environment.items()],
            indent="  ",
        )
    )
    for warning in settings.warnings:
        print(f"warning: {warning}")
    return 0


def _table(rows: Sequence[tuple[str, ...]], indent: str = "") -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows
    )
