"""`run --resume ID` alone continues a killed session of the built-in agent: the session's own
provider and model are enough (no `--provider` again), to the end, and `--out` is written."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a built-in agent session through the real harness, twice


def test_a_killed_builtin_session_resumes_with_its_own_provider(tmp_path, suite_cache):
    env = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}
    env.update(
        HOME=str(tmp_path / "home"),
        MAXKERNEL_TUI_DATA_DIR=str(tmp_path / "data"),
        MAXKERNEL_TUI_CACHE_DIR=str(suite_cache),
        MAXKERNEL_TUI_CONFIG=str(tmp_path / "none.toml"),
    )
    cli = [sys.executable, "-m", "maxkernel_tui.cli", "run"]
    log = tmp_path / "first.err"
    with log.open("w") as stderr:
        first = subprocess.Popen(
            [*cli, "--task", "12p", "--provider", "builtin", "--max-iterations", "1", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert first.stdout is not None
        kinds = []
        for line in first.stdout:  # events as they are stored; stop at the first proposal
            kinds.append(json.loads(line)["kind"])
            if kinds[-1] == "proposal":
                break
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    assert kinds[-1] == "proposal", kinds
    session = re.search(r"session (\S+) \(new\)", log.read_text()).group(1)
    out = tmp_path / "k.py"
    resumed = subprocess.run(
        [*cli, "--resume", session, "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"session {session} (resumed)" in resumed.stderr
    assert "def computation" in out.read_text()
