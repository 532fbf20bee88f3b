"""Run the `maxkernel-tui` command line as a user does, with its files inside the test's tmp_path
and no credentials from the machine running the tests."""

import os
import subprocess
import sys

import pytest

CREDENTIALS = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GEMINI_BASE_URL",
)


@pytest.fixture
def run_cli(tmp_path):
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in CREDENTIALS and not k.startswith("MAXKERNEL_TUI_")
    }
    base |= {
        "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
        "MAXKERNEL_TUI_CONFIG": str(tmp_path / "config.toml"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
    }

    def run(*args, env=None, expect=0):
        done = subprocess.run(
            [sys.executable, "-m", "maxkernel_tui.cli", *args],
            capture_output=True,
            text=True,
            check=False,
            env=base | (env or {}),
            timeout=300,
        )
        if expect is not None:
            assert done.returncode == expect, done.stdout + done.stderr
        return done

    return run
