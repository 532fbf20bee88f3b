"""Nothing the engineer saved or promoted is overwritten without a version to go back to: the
workbench's kernel file is written by the engineer's save, and every other write keeps what the
file held as a kernel version first (services/kernel_file.py); the agents' pane says where, and
f6 brings it back. The search and the Auto session run on fake tools (no jax, no workers)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from maxkernel_tui.agents.roles.tunables import set_tunables
from maxkernel_tui.agents.search.runner import Search
from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.screens.messages import KernelPromoted
from maxkernel_tui.screens.search import SearchScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.services.search_feed import SearchFeed
from maxkernel_tui.services.workbench_session import WorkbenchSession
from maxkernel_tui.store.db import Store, open_store
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import DIAGNOSIS, GOOD, Bench, kernel, plan, rmsnorm_task, variant
from tests.support.waiting import until

SIZE = (160, 48)
EDIT = set_tunables(GOOD, {"BLOCK_ROWS": 128}) + "# my hand edit: rows of 128\n"
PROMOTED = set_tunables(GOOD, {"BLOCK_ROWS": 2048})


@dataclass
class OpenedFake:
    """What `open_search` returns, for a search made on the test's bench."""

    search: Search

    @property
    def session_id(self) -> str:
        return self.search.base.session_id

    async def aclose(self) -> None:
        return None


@pytest.fixture
def app_and_bench(tmp_path: Path):
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    app = MaxKernelApp(cache=tmp_path / "cache", task=rmsnorm_task(), settings=settings)
    bench = Bench(open_store(settings.store_path), tmp_path / "sessions")
    return app, bench, settings


def pane_lines(app: MaxKernelApp) -> str:
    return "\n".join(str(line) for line in app.screen.agents.lines)


async def test_a_saved_edit_survives_a_graph_search_that_ends(app_and_bench, monkeypatch) -> None:
    app, bench, settings = app_and_bench
    provider = RoleProvider({"implementer": [variant(rows) for rows in (512, 1024, 2048)]})

    async def open_search(self: WorkbenchSession, seed: str, config: object):
        search = bench.search(provider, seed=seed, algorithm="beam", width=1, branches=1, depth=1)
        return OpenedFake(search), SearchFeed.following(search.base.journal, settings.store_path)

    monkeypatch.setattr(WorkbenchSession, "open_search", open_search)
    async with app.run_test(size=SIZE) as pilot:
        workbench = app.screen
        assert isinstance(workbench, WorkbenchScreen)
        kernel_file = workbench.session.kernel_path
        workbench.source.editor.load_text(EDIT)
        await pilot.press("ctrl+s")
        assert kernel_file.read_text() == EDIT
        await pilot.press("f3")  # the search starts from the saved edit, and ends
        await until(pilot, lambda: isinstance(app.screen, SearchScreen))
        search_id = app.screen.session_id
        await until(pilot, lambda: "kept as" in pane_lines(workbench), timeout=60)
        assert kernel_file.read_text() != EDIT  # the search's best kernel is the source now
        with Store(settings.store_path) as store:
            kept = [v for v in store.kernel_versions(search_id) if v.source == EDIT]
        assert len(kept) == 1  # a version of the search's session
        assert f"kept as v{kept[0].number} of session {search_id}" in pane_lines(workbench)
        await pilot.press("escape")  # back to the workbench
        await until(pilot, lambda: app.screen is workbench)
        await pilot.press("f6")
        await until(pilot, lambda: workbench.source.text == EDIT)
        assert kernel_file.read_text() == EDIT


async def test_a_promoted_kernel_survives_autos_first_version(app_and_bench, monkeypatch) -> None:
    app, bench, settings = app_and_bench
    with Store(settings.store_path) as store:
        search = store.create_session("12p_RMSNorm", "graph")
        store.add_kernel_version(search.id, PROMOTED)
    provider = RoleProvider(
        {"planner": [plan("a")], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )

    async def start(
        self: WorkbenchSession, mode: object, progress: object = None, **where: object
    ) -> None:
        """Auto on the bench (fake tools), delivered to the workbench as a real start does."""
        engine = bench.engine(provider, mode="auto", max_iterations=1)
        engine.journal.subscribe(self._collect)
        self.session_id = engine.session_id
        self.running = asyncio.create_task(engine.run())
        self.running.add_done_callback(lambda _: self._delivery.schedule())

    monkeypatch.setattr(WorkbenchSession, "start", start)
    async with app.run_test(size=SIZE) as pilot:
        app.screen.post_message(KernelPromoted(rmsnorm_task(), PROMOTED, "node #3", search.id))
        await until(pilot, lambda: app.screen.source.text == PROMOTED)
        workbench = app.screen
        assert isinstance(workbench, WorkbenchScreen)
        await pilot.press("f2")  # Auto writes its v1 over the promoted kernel
        await until(pilot, lambda: workbench.source.text == GOOD)
        await until(pilot, lambda: "kept as" in pane_lines(workbench), timeout=60)
        auto_id = workbench.session.session_id
        with Store(settings.store_path) as store:
            kept = [v for v in store.kernel_versions(auto_id) if v.source == PROMOTED]
        assert len(kept) == 1
        await until(pilot, lambda: not workbench.session.is_running)
        await pilot.press("f6")
        await until(pilot, lambda: workbench.source.text == PROMOTED)
        assert workbench.session.kernel_path.read_text() == PROMOTED
