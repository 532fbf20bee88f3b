"""The search screen says when a search has ended, and why, the moment it ends, and lists the
strategies skipped because the agent had no move for them (fake tools: no jax, no workers)."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.widgets import Markdown, Static, Tree

from maxkernel_tui.screens.search import SearchScreen
from maxkernel_tui.services.search_feed import SearchFeed
from maxkernel_tui.store.db import Store
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import Bench, rmsnorm_task, variant
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio


class RowMovesOnly(RoleProvider):
    def no_move(self, strategy: str, kernel: str) -> str | None:
        return None if strategy == "grow-row-blocks" else "no move here"


async def test_the_screen_says_done_and_why_the_moment_the_search_ends(tmp_path) -> None:
    store_path = tmp_path / "s.db"
    with Store(store_path) as db:
        bench = Bench(db, tmp_path / "sessions")
        provider = RowMovesOnly({"implementer": [variant(r) for r in (256, 512, 1024)]})
        search = bench.search(
            provider, moves=provider, algorithm="beam", width=1, branches=1, depth=2
        )
        feed = SearchFeed.following(search.base.journal, store_path)
        screen = SearchScreen(rmsnorm_task(), feed, control=search)
        app: App[None] = App()
        async with app.run_test(size=(160, 40)) as pilot:
            await app.push_screen(screen)
            counters = screen.query_one("#counters", Static)
            await until(pilot, lambda: "─ running" in str(counters.content))
            outcome = await search.run()
            await until(pilot, lambda: "done:" in str(counters.content), timeout=5)
            shown = str(counters.content)
            assert f"─ done: {outcome.reason}" in shown and "running" not in shown
            assert "strategies skipped: nothing for them to change" in shown
            tree = screen.query_one("#nodes", Tree)
            tree.move_cursor(screen._tree_nodes["n0"])
            await pilot.pause()
            plan = str(screen.query_one("#plan", Markdown).source)
            assert "the agent found nothing for them to change:" in plan and "no move here" in plan


async def test_the_marks_are_explained_and_no_solid_bars_stand_for_a_missing_score(
    tmp_path,
) -> None:
    """Every node rejected: no best score, so no bars (a sparkline of one value is three rows
    of solid blocks); the legend says what ✓ ✗ ≡ ✂ mean."""
    from textual.widgets import Sparkline

    from tests.support.engine import FakeTools, rejected

    store_path = tmp_path / "s.db"
    with Store(store_path) as db:
        bench = Bench(db, tmp_path / "sessions")
        provider = RoleProvider({"implementer": [variant(r) for r in (256, 512)]})
        tools = FakeTools(judge=lambda source, tools: rejected())
        search = bench.search(provider, tools=tools, algorithm="parallel", width=1, depth=1)
        feed = SearchFeed.following(search.base.journal, store_path)
        screen = SearchScreen(rmsnorm_task(), feed, control=search)
        app: App[None] = App()
        async with app.run_test(size=(160, 40)) as pilot:
            await app.push_screen(screen)
            counters = screen.query_one("#counters", Static)
            await search.run()
            await until(pilot, lambda: "done:" in str(counters.content), timeout=5)
            assert not screen.query_one("#best", Sparkline).display
            assert "█" not in app.export_screenshot()
            legend = str(screen.query_one("#legend", Static).content)
            assert "≡ the same kernel as another node" in legend and "✂ pruned" in legend
