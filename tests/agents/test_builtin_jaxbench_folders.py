"""A JAXBench native folder (`baseline.py` with `CONFIG`, `create_inputs`, `workload`, an
`optimized.py` beside it) through `run` and `search` with the built-in agent, as a new user
runs them: no traceback, a kernel accepted, exit status 0, and no session left `active`. The
cache sits outside the home directory (user_env), as everywhere in these runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.store.db import Store
from tests.support.cli_runs import builtin_run, command, finished, user_env
from tests.support.task_folders import write_jaxbench

# Built-in agent sessions through the real harness: minutes each on a 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def test_run_and_search_on_a_jaxbench_folder_with_the_builtin_agent(tmp_path: Path) -> None:
    task = write_jaxbench(tmp_path / "tasks")
    env = user_env(tmp_path, tmp_path / "cache")
    run = builtin_run(str(task), tmp_path / "kernel.py", env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert "best accepted kernel v1 written to" in run.stderr
    search = finished(
        command(
            "search",
            "--task",
            str(task),
            "--algorithm",
            "beam",
            "--provider",
            "builtin",
            "--width",
            "1",
            "--depth",
            "1",
            "--branches",
            "1",
            "--max-evals",
            "2",
        ),
        env,
        timeout=1200,
    )
    assert search.returncode == 0, search.stdout[-2000:] + search.stderr[-2000:]
    assert "Traceback" not in search.stderr
    with Store(tmp_path / "data" / "sessions.db") as store:
        statuses = sorted((s.session.mode, s.session.status) for s in store.list_sessions())
    assert statuses == [("auto", "done"), ("graph", "done")]
