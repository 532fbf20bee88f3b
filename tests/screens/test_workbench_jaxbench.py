"""The workbench on a JAXBench native folder: its starter defines `workload` with the baseline's
parameters, and f5 opens a session on it (the task described, the workers started) up to the
planner's first proposal; stopped, the session is stopped, not left active. The model is an
in-process fake; the store, harness and describe worker are real (slow: worker processes)."""

from __future__ import annotations

import pytest
from textual.widgets import TextArea

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.store.db import Store
from tests.fakes.role_provider import RoleProvider
from tests.support import waiting
from tests.support.screens import plan, workbench_state
from tests.support.task_folders import write_jaxbench

pytestmark = pytest.mark.slow  # worker processes: the task's description and the evaluators


async def test_f5_opens_a_session_on_a_jaxbench_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path / "cache"))
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    task = load_task(write_jaxbench(tmp_path / "tasks"))
    provider = RoleProvider({"planner": [plan("tiles of 256 rows")]})
    app = MaxKernelApp(
        cache=tmp_path / "cache", task=task, settings=settings, agent_provider=provider
    )
    async with app.run_test(size=(160, 48)) as pilot:
        assert "def workload(x, w):" in app.screen.query_one("#source", TextArea).text
        await pilot.press("f5")
        await waiting.until(
            pilot,
            lambda: app.screen.agents.proposal is not None,
            240.0,
            describe=lambda: workbench_state(app),
        )
        [request] = provider.requests
        assert "baseline.py:" in request.messages[-1].content
        await pilot.press("escape")  # stops the session
        await waiting.until(
            pilot, lambda: not app.screen.session.is_running, 60.0, describe=lambda: "running"
        )
    with Store(settings.store_path) as store:
        [summary] = store.list_sessions()
    assert summary.session.status == "stopped"
