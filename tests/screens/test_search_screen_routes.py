"""How the search screen hears of a search: one running in this process reaches it through the
search's events, batched as the workbench's are (no timer reads the store); one running in
another process sends no events, so the screen reads it again now and then, and still follows
it to its end. Fake tools: no jax, no workers."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from textual.app import App
from textual.widgets import Static

from maxkernel_tui.screens.search import SearchScreen
from maxkernel_tui.services.search_feed import SearchFeed
from maxkernel_tui.store.db import Store
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import Bench, rmsnorm_task, variant
from tests.support.paths import TESTS
from tests.support.screens import tree_labels
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio


def counters(screen: SearchScreen) -> str:
    return str(screen.query_one("#counters", Static).content)


async def test_a_search_in_this_process_reaches_the_screen_by_its_events_alone(
    tmp_path, monkeypatch
) -> None:
    store_path = tmp_path / "s.db"
    with Store(store_path) as db:
        provider = RoleProvider({"implementer": [variant(r) for r in (256, 512)]})
        search = Bench(db, tmp_path / "sessions").search(
            provider, algorithm="beam", width=1, depth=1
        )
        feed = SearchFeed.following(search.base.journal, store_path)
        reads = 0
        read = feed.read

        def counted() -> object:
            nonlocal reads
            reads += 1
            return read()

        monkeypatch.setattr(feed, "read", counted)
        screen = SearchScreen(rmsnorm_task(), feed, control=search)

        def no_polling(make: Any) -> Any:
            """`make` (set_timer, set_interval) for Textual's own timers, refused for ours."""

            def made(delay: float, callback: Any = None, **kwargs: Any) -> Any:
                if getattr(callback, "__module__", "").startswith("maxkernel_tui"):
                    raise AssertionError(f"a search in this process, and a timer: {callback}")
                return make(delay, callback, **kwargs)

            return made

        for name in ("set_timer", "set_interval"):
            monkeypatch.setattr(screen, name, no_polling(getattr(screen, name)))
        app: App[None] = App()
        async with app.run_test(size=(160, 40)) as pilot:
            await app.push_screen(screen)
            await until(pilot, lambda: "─ running" in counters(screen))
            assert not any("✓" in label for label in tree_labels(screen))  # nothing judged yet
            outcome = await search.run()
            await until(pilot, lambda: "done:" in counters(screen), timeout=10)
            assert f"done: {outcome.reason}" in counters(screen)
            assert any(label.startswith("#0 ✓") for label in tree_labels(screen))
            assert any(label.startswith("#1") for label in tree_labels(screen))
            # every read of the store after the first came from a batch of the search's events
            assert screen.batches >= 1 and 1 < reads <= 1 + screen.batches


async def test_a_search_in_another_process_is_followed_to_its_end(tmp_path) -> None:
    store_path = tmp_path / "s.db"
    Store(store_path).close()  # the schema, before two processes open the file
    elsewhere = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.search_elsewhere",
        str(store_path),
        str(tmp_path / "sessions"),
        cwd=TESTS.parent,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert elsewhere.stdin is not None and elsewhere.stdout is not None
    try:
        session_id = (await asyncio.wait_for(elsewhere.stdout.readline(), 60)).decode().strip()
        feed = SearchFeed(store_path, session_id)
        assert not feed.live  # no events from another process
        screen = SearchScreen(rmsnorm_task(), feed)
        app: App[None] = App()
        async with app.run_test(size=(160, 40)) as pilot:
            await app.push_screen(screen)
            await pilot.pause()
            assert not any("✓" in label for label in tree_labels(screen))
            assert "done:" not in counters(screen)
            elsewhere.stdin.write(b"go\n")
            await elsewhere.stdin.drain()
            await until(pilot, lambda: "done:" in counters(screen), timeout=60)
            assert any(label.startswith("#0 ✓") for label in tree_labels(screen))
            assert screen.batches == 0  # followed by reading the store, not by events
        assert await asyncio.wait_for(elsewhere.wait(), 30) == 0
    finally:
        if elsewhere.returncode is None:
            elsewhere.kill()
            await elsewhere.wait()
