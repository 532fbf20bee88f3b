"""The workbench shows what the agents' tools do: a line per call and per result in the Agents
pane, and the model of the current step's role in the status line."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from maxkernel_tui.agents.orchestration.events import StepStarted, ToolAnswered, ToolsCalled
from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from tests.support.waiting import until

pytestmark = pytest.mark.slow  # the workbench warms the harness's workers when it opens

CONFIG = """
provider = "gemini"
model = "gemini-2.5-flash"
[roles.implementer]
model = "gemini-3.1-pro"
"""


async def test_tool_calls_results_and_the_role_s_model_are_shown(
    tmp_path: Path, suite_tasks: object
) -> None:
    (tmp_path / "config.toml").write_text(CONFIG)
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "config.toml"),
        }
    )
    app = MaxKernelApp(
        cache=tmp_path / "cache", task=find_task("12p", suite_tasks), settings=settings
    )
    step = "i1/implement"
    called = ToolsCalled(
        f"{step}/tools",
        step,
        "implementer",
        0,
        "",
        [{"name": "jax_api", "arguments": {"name": "pl.BlockSpec"}}],
        "gemini-3.1-pro",
        900,
        0.002,
    )
    result = ToolAnswered(
        f"{step}/tool0", step, "implementer", "c", "jax_api", {}, True, "pl.BlockSpec = ...", 0.01
    )
    async with app.run_test(size=(180, 48)) as pilot:
        status = app.screen.query_one("#status", Static)
        assert "─ gemini gemini-2.5-flash ─" in str(status.content)  # no step yet: the session's
        started = StepStarted(f"{step}/start", step, "implementer", 1, "implementer (i1)")
        app.screen.deliver([started, called, result], False)
        await until(pilot, lambda: "gemini-3.1-pro (implementer)" in str(status.content))
        await until(pilot, lambda: "jax_api →" in "\n".join(app.screen.agents.lines))
        lines = "\n".join(app.screen.agents.lines)
        assert "implementer calls jax_api(name='pl.BlockSpec') (gemini-3.1-pro" in lines
        assert "jax_api → pl.BlockSpec = ..." in lines
