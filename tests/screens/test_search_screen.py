"""The search screen follows a search running in the app's process: nodes appear in the tree as
they are judged, the counters and the best-so-far line move, space pauses, and promoting an
accepted node opens the workbench on that node's kernel."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Markdown, Sparkline, Static, TextArea, Tree

from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.launch import open_search
from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.kernels.report.checks import SMALL_SHAPES_ONLY
from maxkernel_tui.screens.search import SearchScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.services.search_feed import SearchFeed
from maxkernel_tui.store.db import Store
from tests.fakes.role_provider import RoleProvider
from tests.support.screens import tree_labels, variant
from tests.support.waiting import until


@pytest.mark.slow  # a real search: evaluations in worker processes
@pytest.mark.asyncio
async def test_follow_a_running_search_and_promote_a_node(
    tmp_path, suite_tasks, suite_cache, monkeypatch
) -> None:
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(suite_cache))
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    task = find_task("12p", suite_tasks)
    app = MaxKernelApp(cache=tmp_path / "cache", settings=settings)
    provider = RoleProvider({"implementer": [variant(256), variant(128)]})
    with Store(settings.store_path) as store:
        async with app.run_test(size=(160, 48)) as pilot:
            opened = await open_search(
                store,
                settings,
                task=task,
                provider=provider,
                config=SearchConfig(algorithm="parallel", width=1, depth=1, max_evals=2),
            )
            feed = SearchFeed.following(
                opened.search.base.journal, settings.store_path, max_evals=2
            )
            screen = SearchScreen(task, feed, control=opened.search)
            await app.push_screen(screen)
            running = asyncio.create_task(opened.search.run())
            counters = screen.query_one("#counters", Static)
            await until(
                pilot, lambda: any(label.startswith("#0 ✓") for label in tree_labels(screen))
            )
            await pilot.press("space")  # pause: the next node waits
            await until(pilot, lambda: "PAUSED" in str(counters.content))
            await pilot.press("space")
            outcome = await asyncio.wait_for(running, 180)
            await until(
                pilot,
                lambda: (
                    len(tree_labels(screen)) == 2 and "evaluations 2/2" in str(counters.content)
                ),
            )
            assert "ranked by XLA@tolerance" in str(counters.content)  # the search's --rank-by
            assert tree_labels(screen)[1].startswith("#1 ✓") and tree_labels(screen)[1].endswith(
                "← #0"
            )
            assert screen.query_one("#best", Sparkline).data  # the best score over time
            await opened.aclose()
            best = outcome.best
            assert best is not None
            screen.query_one("#nodes", Tree).move_cursor(screen._tree_nodes[best.ref])
            # the node's verdict and its evidence, as eval prints them (tests sample no tiles)
            plan = screen.query_one("#plan", Markdown)
            await until(pilot, lambda: f"accepted, {SMALL_SHAPES_ONLY}" in plan.source)
            assert "evidence: numerics: check on" in plan.source
            await pilot.press("p")
            workbench = await until(
                pilot, lambda: app.screen if isinstance(app.screen, WorkbenchScreen) else None
            )
            assert workbench.query_one("#source", TextArea).text == best.source
