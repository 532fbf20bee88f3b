"""Text from kernels, models and task files in the panes: control characters shown as escapes,
Rich markup shown as written (no bold, no link). Fast: no harness, no worker processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import Markdown, Static

from maxkernel_tui.agents.orchestration.gates import Proposal
from maxkernel_tui.kernels.evaluation.report import Check, EvalReport
from maxkernel_tui.screens.pane_messages import TestsMessage
from maxkernel_tui.store.kinds import HITL
from tests.screens.test_panes import SIZE, Bench
from tests.support.hostile_text import HOSTILE, live_controls
from tests.support.waiting import until


async def test_hostile_text_in_the_tests_agents_plan_and_profile_panes(tmp_path: Path) -> None:
    app = Bench(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.workbench
        report = EvalReport("12p_RMSNorm", "kernel.py", ["v5e"], "cpu")
        report.add(Check("trace", "fail", HOSTILE))
        screen.tests.post_message(TestsMessage([report]))
        await until(pilot, lambda: any("verdict" in line for line in screen.tests.lines))
        proposal = Proposal(
            step="i1/plan", role="planner", subject="plan", content=HOSTILE, previous="",
            summary=HOSTILE,
        )  # fmt: skip
        decision = asyncio.ensure_future(screen.session.gate_for(HITL).decide(proposal))
        await until(pilot, lambda: screen.agents.proposal)
        screen.plan.show(HOSTILE)
        screen.profile.show_error(HOSTILE)
        await pilot.pause()
        shown = [
            *screen.tests.lines,
            str(screen.query_one("#proposal-header", Static).content),
            str(screen.query_one("#roofline", Static).content),
            screen.query_one(Markdown).source,
        ]
        assert all(live_controls(text) == [] for text in shown), shown
        assert any("\\x1b]52;c;" in line for line in screen.tests.lines)
        # markup stays text where it is drawn
        assert "[bold]loud[/bold]" in app.export_screenshot().replace("&#160;", " ")
        await pilot.press("a")
        await asyncio.wait_for(decision, 5)
