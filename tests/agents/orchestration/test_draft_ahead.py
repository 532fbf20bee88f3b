"""A provider with work before the first step (the built-in agent's drafts) does it while the
session describes the task, and stops when the session closes or fails to open; the built-in
agent's worker keeps what it drafted ahead for the steps."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from maxkernel_tui.agents.builtin import answers, worker
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.reply import DRAFT_AHEAD, Failure
from maxkernel_tui.agents.orchestration import session as session_module
from maxkernel_tui.agents.orchestration.gates import AutoGate
from maxkernel_tui.agents.orchestration.session import open_session
from maxkernel_tui.config import Settings
from maxkernel_tui.store.db import Store
from tests.support.engine import rmsnorm_task


class DraftingProvider:
    """Drafts until cancelled, saying when it started and whether it was stopped."""

    name = model = "drafting"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.started = threading.Event()  # set from the loop, waited on in describe's thread
        self.cancelled = asyncio.Event()

    async def draft_ahead(self, task_dir: str, target: str) -> None:
        self.asked.append((task_dir, target))
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def stream(self, request):  # pragma: no cover  no step runs here
        raise AssertionError("no step runs in these tests")
        yield

    async def aclose(self) -> None:
        pass


@pytest.fixture
def opener(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = Settings(provider="gemini", data_dir=tmp_path / "data", tpu_target="v5e")
    store = Store(settings.store_path)
    provider = DraftingProvider()

    def describe_after_drafting_started(task, target: str) -> str:
        assert provider.started.wait(30), "the task was described before any drafting started"
        return f"facts of {task.task_id}"

    monkeypatch.setattr(session_module, "task_facts", describe_after_drafting_started)

    async def opened():
        return await open_session(
            store,
            settings,
            task=rmsnorm_task(),
            mode="auto",
            gates=lambda mode: AutoGate(),
            provider=provider,
        )

    yield provider, opened
    store.close()


async def test_the_drafting_overlaps_the_description_and_stops_when_the_session_closes(opener):
    provider, opened = opener
    session = await opened()
    assert provider.asked == [(str(rmsnorm_task().folder), "v5e")]
    # still drafting when the session opens: the first step waits for it
    assert session.ahead is not None and not session.ahead.done()
    await session.aclose()
    assert provider.cancelled.is_set() and session.ahead.done()


async def test_a_session_that_fails_to_open_stops_its_drafting(opener, monkeypatch):
    provider, opened = opener

    def no_tools(*args, **kwargs):
        raise ValueError("no cluster at 127.0.0.1:1")

    monkeypatch.setattr(session_module, "build_tools", no_tools)
    with pytest.raises(ValueError, match="no cluster"):
        await opened()
    await asyncio.wait_for(provider.cancelled.wait(), 10)


def test_the_worker_keeps_what_it_drafted_ahead_for_the_steps(monkeypatch):
    task_dir = str(rmsnorm_task().folder)
    drafted: list[str] = []

    def draft(task, target: str) -> object:
        drafted.append(target)
        return object()

    monkeypatch.setattr(answers, "_draft", draft)
    cache = answers.DraftCache()
    line = json.dumps({"role": DRAFT_AHEAD, "task_dir": task_dir, "target": "v5e"})
    reply = worker.respond(line, cache)
    assert (reply.text, reply.failure) == ("", None)
    ahead = cache.get(task_dir, "v5e")  # what a step reads
    assert drafted == ["v5e"] and cache.get(task_dir, "v5e") is ahead


def test_drafting_ahead_that_cannot_plan_answers_the_reason(monkeypatch):
    def cannot(task, target: str) -> object:
        raise CannotPlan("no stage for a scatter")

    monkeypatch.setattr(answers, "_draft", cannot)
    line = json.dumps(
        {"role": DRAFT_AHEAD, "task_dir": str(rmsnorm_task().folder), "target": "v5e"}
    )
    reply = worker.respond(line, answers.DraftCache())
    assert reply.failure is Failure.CANNOT_PLAN and "scatter" in reply.error
