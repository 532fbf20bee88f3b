"""Running `maxkernel-tui` as a user does, in a subprocess with its own home and data folders
and a Gemini key for a fake server (the `run` and `search` command tests share this)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KEY = "gemini-test-key-0123456789"


@pytest.fixture
def env(tmp_path: Path, suite_cache: Path) -> dict[str, str]:
    return dict(
        os.environ,
        HOME=str(tmp_path / "home"),
        MAXKERNEL_TUI_DATA_DIR=str(tmp_path / "data"),
        MAXKERNEL_TUI_CACHE_DIR=str(suite_cache),
        GEMINI_API_KEY=KEY,
        JAX_PLATFORMS="cpu",
    )


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "maxkernel_tui.cli", *args]


def finished(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=900, check=False)
