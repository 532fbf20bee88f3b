"""The workbench's evidence: a kernel proposal is judged while it waits (draft-ahead), so the
card `c` shows is the verdict `a` approves, recorded without judging the kernel again; after
approval, f7 shows the version's card. The store, harness and profiler are real (slow)."""

from __future__ import annotations

import pytest
from textual.widgets import Markdown, Static

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.screens.evidence_card import EvidenceCardScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from tests.fakes.role_provider import RoleProvider
from tests.support import waiting
from tests.support.screens import DIAGNOSIS, GOOD, kernel, plan, screenshot, workbench_state

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]  # the real harness in worker processes


async def until(pilot, condition, timeout: float = 240.0):
    return await waiting.until(
        pilot, condition, timeout, describe=lambda: workbench_state(pilot.app)
    )


def card_text(app: MaxKernelApp) -> str:
    screen = app.screen
    return (
        screen.query_one("#card", Markdown).source if isinstance(screen, EvidenceCardScreen) else ""
    )


async def test_a_waiting_kernel_is_judged_ahead_and_its_card_is_one_key_away(
    tmp_path, suite_tasks, suite_cache, monkeypatch
) -> None:
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(suite_cache))
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )
    app = MaxKernelApp(
        cache=tmp_path / "cache",
        task=find_task("12p", suite_tasks),
        settings=settings,
        agent_provider=provider,
    )
    async with app.run_test(size=(160, 48)) as pilot:
        workbench = app.screen
        assert isinstance(workbench, WorkbenchScreen)
        await pilot.press("f5")
        await until(pilot, lambda: workbench.agents.proposal is not None)
        await pilot.press("a")  # the plan
        await until(
            pilot,
            lambda: (p := workbench.agents.proposal) is not None and p.subject == "kernel",
        )
        draft = workbench.query_one("#proposal-draft", Static)
        await until(pilot, lambda: "judged ahead: verdict: ACCEPTED" in str(draft.content))
        await pilot.press("c")
        await until(pilot, lambda: "verdict: ACCEPTED" in card_text(app))
        text = card_text(app)
        assert "implementer's proposal" in text and "judged ahead of your decision" in text
        assert "✓ numerics" in text and "tokens" in text
        screenshot(app, "evidence_card_proposal.svg")
        await pilot.press("escape")
        await pilot.press("a")  # approves the kernel whose card was shown
        await until(pilot, lambda: workbench.source.version == 1)
        await until(
            pilot,
            lambda: any(line.startswith("verdict: ACCEPTED") for line in workbench.tests.lines),
        )
        await pilot.press("f7")
        await until(pilot, lambda: "kernel version v1" in card_text(app))
        assert "verdict: ACCEPTED" in card_text(app)
        await pilot.press("escape")
        (version,) = workbench.session.kernel_versions()
        drafted = workbench.session.drafts[GOOD]
        assert version.source == GOOD
        # the verdict recorded is the one judged ahead: the kernel was not judged again
        (stored,) = workbench.session.store.evaluations(version.id)
        assert stored.report["seeds"] == drafted.seeds and drafted.seeds
