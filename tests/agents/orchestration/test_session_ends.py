"""A session never stays `active` once what ran it is over: an exception in a step, in the
opening of a new session or in a search ends it failed, with the reason stored as its end; a
stop while opening leaves it stopped (resumable). Fake tools and providers: no jax."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from maxkernel_tui.agents.orchestration import session as opening
from maxkernel_tui.agents.orchestration.engine import LoopLimits
from maxkernel_tui.agents.orchestration.events import ErrorRaised, SessionEnded
from maxkernel_tui.agents.orchestration.gates import AutoGate
from maxkernel_tui.agents.orchestration.session import open_session
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import SessionStatus
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import GOOD, Bench, FakeTools, events, kernel, plan, rmsnorm_task

pytestmark = pytest.mark.asyncio


def _vanished(source: str, tools: FakeTools) -> EvalReport:
    """An evaluation that meets what no handler expects (a task file gone missing)."""
    raise FileNotFoundError(2, "No such file or directory", "/tasks/gone/reference.py")


async def test_an_unexpected_error_in_a_step_fails_the_session_with_its_reason(
    bench: Bench,
) -> None:
    provider = RoleProvider({"planner": [plan()], "implementer": [kernel(GOOD)]})
    engine = bench.engine(provider, tools=FakeTools(judge=_vanished))
    outcome = await engine.run()

    assert outcome.status == SessionStatus.FAILED
    assert (
        outcome.reason.startswith("error: FileNotFoundError") and "reference.py" in outcome.reason
    )
    assert bench.store.session(engine.session_id).status == "failed"
    [ended] = events(bench.store, engine.session_id, SessionEnded)
    assert isinstance(ended, SessionEnded) and ended.reason == outcome.reason
    [error] = events(bench.store, engine.session_id, ErrorRaised)
    assert isinstance(error, ErrorRaised) and "FileNotFoundError" in error.message


async def test_an_unexpected_error_fails_the_search(bench: Bench) -> None:
    provider = RoleProvider({"implementer": [kernel(GOOD)]})
    search = bench.search(provider, tools=FakeTools(judge=_vanished), algorithm="parallel")
    outcome = await search.run()

    assert outcome.status == SessionStatus.FAILED
    assert outcome.reason.startswith("error: FileNotFoundError")
    assert bench.store.session(search.base.session_id).status == "failed"


async def test_a_search_whose_every_node_met_an_error_failed(bench: Bench) -> None:
    search = bench.search(RoleProvider({}), algorithm="parallel", depth=1, width=2)
    outcome = await search.run()  # no answer for any implementer: each node a model error

    assert outcome.status == SessionStatus.FAILED
    assert "every node ended on an error (#0: " in outcome.reason
    assert bench.store.session(search.base.session_id).status == "failed"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(provider="gemini", data_dir=tmp_path / "data", tpu_target="v5e")


async def _open(store: Store, settings: Settings) -> None:
    await open_session(
        store,
        settings,
        task=rmsnorm_task(),
        gates=lambda mode: AutoGate(),
        limits=LoopLimits(max_iterations=1),
        provider=RoleProvider({}),
    )


async def test_a_new_session_whose_opening_fails_is_failed_not_active(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def describe_fails(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(opening, "describe_tasks", describe_fails)
    with Store(settings.store_path) as store:
        with pytest.raises(OSError, match="disk full"):
            await _open(store, settings)
        [summary] = store.list_sessions()
        assert summary.session.status == "failed"
        [ended] = events(store, summary.session.id, SessionEnded)
        assert isinstance(ended, SessionEnded)
        assert ended.reason.startswith("could not start: OSError: disk full")


async def test_a_new_session_stopped_while_opening_is_stopped(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    describing, release = threading.Event(), threading.Event()

    def describe_slowly(*args: object, **kwargs: object) -> None:
        describing.set()
        release.wait(60)
        raise OSError("never read: the opening was stopped")

    monkeypatch.setattr(opening, "describe_tasks", describe_slowly)
    with Store(settings.store_path) as store:
        opened = asyncio.create_task(_open(store, settings))
        assert await asyncio.to_thread(describing.wait, 60)
        opened.cancel()  # the engineer stops it (Esc, ctrl+q) while the task is described
        with pytest.raises(asyncio.CancelledError):
            await opened
        release.set()
        [summary] = store.list_sessions()
        assert summary.session.status == "stopped"
        assert events(store, summary.session.id, SessionEnded) == []
