"""Driving the agents from the workbench with the keyboard (Pilot): approve, reject with a reason,
edit, Esc, hand-off to Auto and back, reopen a session after the app is closed. The model is an
in-process fake; the store, harness and profiler are real (slow: worker processes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from textual.widgets import Input, Markdown, Static, TextArea

from maxkernel_tui.agents.llm.types import TextDelta
from maxkernel_tui.agents.orchestration.limits import LoopLimits
from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.store.db import Store
from tests.fakes.role_provider import RoleProvider
from tests.support import waiting
from tests.support.engine import BAD
from tests.support.screens import DIAGNOSIS, GOOD, kernel, plan, status, workbench_state

SIZE = (160, 48)
pytestmark = pytest.mark.slow  # the real harness: evaluation and profiling in worker processes


class HangingProvider(RoleProvider):
    """Streams a few words, then waits forever; records whether the call was really cancelled."""

    def __init__(self) -> None:
        super().__init__({})
        self.cancelled = asyncio.Event()

    async def stream(self, request) -> AsyncIterator:  # type: ignore[override]
        self.requests.append(request)
        yield TextDelta("Thinking about tiles")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


@pytest.fixture
def make_app(tmp_path, suite_tasks, suite_cache, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(suite_cache))
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )

    def make(provider, resume: str | None = None) -> MaxKernelApp:
        task = None if resume else find_task("12p", suite_tasks)
        return MaxKernelApp(
            cache=tmp_path / "cache",
            task=task,
            settings=settings,
            agent_provider=provider,
            resume=resume,
        )

    make.settings = settings
    return make


async def until(pilot, condition, timeout: float = 240.0):
    """Let the app run until `condition()` holds; say what the workbench showed if it does not."""
    return await waiting.until(
        pilot, condition, timeout, describe=lambda: workbench_state(pilot.app)
    )


def pending(app):
    """The proposal on screen, waiting for a key."""
    return app.screen.agents.proposal


async def test_approve_a_plan_and_the_kernel_appears_in_source(make_app) -> None:
    provider = RoleProvider(
        {
            "planner": [plan("tiles of 256 rows")],
            "implementer": [kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        proposal = await until(pilot, lambda: pending(app))
        assert proposal.subject == "plan"
        assert "planner proposes a plan" in str(
            app.screen.query_one("#proposal-header", Static).content
        )
        await pilot.press("a")
        await until(pilot, lambda: (p := pending(app)) is not None and p.subject == "kernel")
        assert "tiles of 256 rows" in app.screen.plan.text  # the approved plan is on screen
        await pilot.press("a")
        source = app.screen.query_one("#source", TextArea)
        await until(pilot, lambda: "BLOCK_ROWS = 256" in source.text)
        await until(
            pilot,
            lambda: any(line.startswith("verdict: ACCEPTED") for line in app.screen.tests.lines),
        )
        assert "v1" in str(app.screen.query_one("#source-pane").border_title)


async def test_reject_with_a_reason_reaches_the_next_proposal(make_app) -> None:
    provider = RoleProvider({"planner": [plan("first"), plan("second")]})
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        await until(pilot, lambda: pending(app))
        await pilot.press("r")
        field = app.screen.query_one("#agent-input", Input)
        assert field.display and field.has_focus
        await pilot.press(*"use bigger blocks", "enter")
        await until(pilot, lambda: len(provider.prompts("planner")) == 2 and pending(app))
        assert "use bigger blocks" in provider.prompts("planner")[1]
        assert "second" in pending(app).content
        await pilot.press("escape")  # stop the session before the app closes


async def test_edit_a_proposed_kernel_then_it_is_evaluated(make_app) -> None:
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        await until(pilot, lambda: pending(app))
        await pilot.press("a")
        await until(pilot, lambda: (p := pending(app)) is not None and p.subject == "kernel")
        await pilot.press("e")
        source = app.screen.query_one("#source", TextArea)
        assert source.has_focus and "BLOCK_ROWS = 256" in source.text
        source.replace(
            "BLOCK_ROWS = 128",
            (source.text.splitlines().index("BLOCK_ROWS = 256"), 0),
            (source.text.splitlines().index("BLOCK_ROWS = 256"), 16),
        )
        await pilot.press("ctrl+s")  # submits the edit
        await until(
            pilot,
            lambda: any(line.startswith("verdict: ") for line in app.screen.tests.lines),
        )
        (version,) = app.screen.session.kernel_versions()
        assert "BLOCK_ROWS = 128" in version.source


async def test_escape_cancels_the_running_model_call(make_app) -> None:
    provider = HangingProvider()
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        await until(
            pilot,
            lambda: (
                "Thinking about tiles" in "\n".join(app.screen.agents.lines) or provider.requests
            ),
        )
        await pilot.press("escape")
        await until(pilot, lambda: provider.cancelled.is_set())
        await until(pilot, lambda: "─ stopped ─" in status(app), timeout=20)
        assert not app.screen.session.is_running


async def test_hand_off_to_auto_mid_session_and_back(make_app) -> None:
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(GOOD), kernel(GOOD)],
            "profiler": [DIAGNOSIS, DIAGNOSIS],
        }
    )
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        await until(pilot, lambda: pending(app))
        await pilot.press("f2")  # hand off: the waiting plan is approved, the rest runs by itself
        assert "─ AUTO ─" in status(app)
        await until(pilot, lambda: len(provider.prompts("implementer")) == 1)
        assert pending(app) is None
        await pilot.press("f2")  # and back: the next proposal waits for a key again
        assert "─ HITL ─" in status(app)
        await until(
            pilot, lambda: (p := pending(app)) is not None and p.step.startswith("i2/"), timeout=400
        )
        await pilot.press("escape")


async def test_a_session_reopens_after_the_app_is_closed(make_app, tmp_path) -> None:
    provider = RoleProvider({"planner": [plan("kept plan")], "implementer": [kernel(GOOD)]})
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        await until(pilot, lambda: pending(app))
        await pilot.press("a")
        await until(pilot, lambda: (p := pending(app)) is not None and p.subject == "kernel")
        session_id = app.screen.session.session_id
    with Store(make_app.settings.store_path) as store:
        assert store.session(session_id).status == "stopped"

    later = RoleProvider({"implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]})
    reopened = make_app(later, resume=session_id)
    async with reopened.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: "kept plan" in reopened.screen.plan.text
        )  # drawn from the stored events
        await pilot.press("f5")
        await until(pilot, lambda: (p := pending(reopened)) is not None and p.subject == "kernel")
        assert later.prompts("planner") == []  # the stored plan was not asked for again
        assert "kept plan" in str(reopened.screen.query_one("#plan", Markdown).source)
        await pilot.press("escape")


async def test_f3_hands_the_current_kernel_to_a_graph_search(make_app) -> None:
    provider = RoleProvider({"implementer": [kernel(GOOD)] * 4})
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        app.screen.query_one("#source", TextArea).load_text(GOOD)
        workbench = app.screen
        await pilot.press("f3")
        from maxkernel_tui.screens.search import SearchScreen

        await until(pilot, lambda: isinstance(app.screen, SearchScreen))
        search = app.screen
        # the workbench under the search says what runs: a graph search, not HITL
        assert "─ GRAPH ─" in str(workbench.query_one("#status", Static).content)
        assert workbench.check_action("agents", ()) is None
        with Store(make_app.settings.store_path) as store:
            nodes = await until(
                pilot,
                lambda: (
                    (found := store.search_nodes(search.session_id))
                    and found[0].kernel_version_id is not None
                    and found
                ),
            )
            root = store.kernel_version(nodes[0].kernel_version_id)
        assert nodes[0].parent_id is None
        assert root.source == GOOD  # the workbench's kernel is the root
        await pilot.press("s")  # stop the search
        await until(
            pilot, lambda: "─ HITL ─" in str(workbench.query_one("#status", Static).content)
        )


async def test_auto_ends_on_its_best_kernel_and_the_session_reopens_in_auto(make_app) -> None:
    # iteration 1 is accepted; iteration 2's kernel fails TPU lowering and its debugger can only
    # repeat it: the session ends with v2 rejected, and the workbench shows v1
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(GOOD), kernel(BAD)],
            "debugger": [kernel(BAD)] * 5,
            "profiler": [DIAGNOSIS] * 2,
        }
    )
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        app.screen.session.limits = LoopLimits(
            max_iterations=2, patience=5, tune_candidates=0, edge_cases=False
        )
        await pilot.press("f2")  # the agents start in Auto
        await until(pilot, lambda: app.screen.session.ended() is not None, timeout=400)
        await until(pilot, lambda: "best accepted kernel v1" in "\n".join(app.screen.tests.lines))
        session_id = app.screen.session.session_id
        # the Source pane's message may come in a later batch than the Tests pane's
        await until(pilot, lambda: app.screen.source.version == 1)
        assert app.screen.source.text == GOOD
        with Store(make_app.settings.store_path) as store:
            assert store.kernel_versions(session_id)[-1].source == BAD  # the last one tried
            assert store.session(session_id).mode == "auto"

    reopened = make_app(RoleProvider({}), resume=session_id)
    async with reopened.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "─ AUTO ─" in status(reopened))  # its own mode, not HITL
        await until(pilot, lambda: reopened.screen.source.version == 1)  # ended on v1
