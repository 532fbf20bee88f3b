"""Fixtures for sessions on 12p_RMSNorm with a real store, the real harness and profiler, and a
provider each test scripts (the slow engine and search tests import them into their conftest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.orchestration.engine import LoopLimits
from maxkernel_tui.agents.orchestration.gates import AutoGate, Gate
from maxkernel_tui.agents.orchestration.session import OpenSession, open_session
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store
from tests.support.engine import rmsnorm_task


@pytest.fixture
def settings(tmp_path: Path, suite_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(suite_cache))
    return Settings(provider="gemini", data_dir=tmp_path / "data", tpu_target="v5e")


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with Store(settings.store_path) as opened:
        yield opened


@pytest.fixture
def rmsnorm() -> Task:
    return rmsnorm_task()


@pytest.fixture
def open_on(store: Store, settings: Settings, rmsnorm: Task):
    """Open (or resume) a session on 12p with a given provider, gate and limits."""
    opened: list[OpenSession] = []

    async def opener(
        provider: Provider,
        *,
        gate: Gate | None = None,
        mode: str = "auto",
        resume: str | None = None,
        **limits: int,
    ) -> OpenSession:
        chosen = gate or AutoGate()
        session = await open_session(
            store,
            settings,
            task=None if resume else rmsnorm,
            mode=mode,
            gates=lambda m: chosen if m == mode else AutoGate(),
            limits=LoopLimits(**{"max_iterations": 1, "tune_candidates": 0, **limits}),
            resume=resume,
            provider=provider,
        )
        opened.append(session)
        return session

    yield opener
    for session in opened:
        session.tools.close()
