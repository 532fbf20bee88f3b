"""Where maxkernel-tui keeps its files; settings grow here (TOML + environment variables)."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "maxkernel-tui"


def cache_dir() -> Path:
    """MAXKERNEL_TUI_CACHE_DIR, else $XDG_CACHE_HOME/maxkernel-tui, else ~/.cache/maxkernel-tui."""
    explicit = os.environ.get("MAXKERNEL_TUI_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / APP_NAME
