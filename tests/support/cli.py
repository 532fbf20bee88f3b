"""Run `maxkernel-tui` in a child process, as a user does, optionally with its own cache."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys


def cli(
    *args: str, cache: pathlib.Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if cache is not None:
        env["MAXKERNEL_TUI_CACHE_DIR"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-m", "maxkernel_tui.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done
