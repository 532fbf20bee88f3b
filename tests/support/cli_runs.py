"""Running `maxkernel-tui` as a user does, in a subprocess with its own home and data folders:
with a Gemini key for a fake server (the `run` and `search` command tests), or with no key at
all (the built-in agent's end-to-end runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KEY = "gemini-test-key-0123456789"


def user_env(tmp_path: Path, cache: Path | None) -> dict[str, str]:
    """This process's environment with no credentials in it, and a home, data folder, cache and
    (absent) config file of the test's own. `cache` None: the cache where a new user has it,
    under the home directory, which every worker's sandbox refuses to read."""
    env = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}
    env.update(
        HOME=str(tmp_path / "home"),
        MAXKERNEL_TUI_DATA_DIR=str(tmp_path / "data"),
        MAXKERNEL_TUI_CONFIG=str(tmp_path / "none.toml"),
        JAX_PLATFORMS="cpu",
    )
    env.pop("XDG_CACHE_HOME", None)
    if cache is None:
        env.pop("MAXKERNEL_TUI_CACHE_DIR", None)
    else:
        env["MAXKERNEL_TUI_CACHE_DIR"] = str(cache)
    return env


@pytest.fixture
def env(tmp_path: Path, suite_cache: Path) -> dict[str, str]:
    return dict(user_env(tmp_path, suite_cache), GEMINI_API_KEY=KEY)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "maxkernel_tui.cli", *args]


def finished(
    args: list[str], env: dict[str, str], timeout: float = 900
) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def builtin_run(task: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`run --mode auto --provider builtin` on `task`, writing its kernel to `out` (one
    iteration, no autotuning: these runs test the loop on a task, not the agent's tuning)."""
    return finished(
        command(
            "run",
            "--task",
            task,
            "--mode",
            "auto",
            "--provider",
            "builtin",
            "--max-iterations",
            "1",
            "--tune-candidates",
            "0",
            "--out",
            str(out),
        ),
        env,
        timeout=1200,
    )


def solved_by_builtin(task: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`eval` of the kernel that `builtin_run` wrote for `task`; the failed `run` itself when it
    wrote none."""
    run = builtin_run(task, out, env)
    if run.returncode != 0:
        return run
    return finished(command("eval", str(out), "--task", task, "--seeds", "1"), env)
