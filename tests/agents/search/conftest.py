"""Fixtures of the search tests: the fast ones run on `bench` (fake tools, no jax); the slow ones
open real searches on 12p_RMSNorm (`open_search_on`), with a provider that answers each role from
its own queue. Kernels differ by their row block, so they are distinct kernels with distinct
estimated speedups. Shared code comes from tests/support."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.launch import OpenSearch, open_search
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store
from tests.support.cli_runs import env
from tests.support.engine import Bench
from tests.support.sessions import rmsnorm, settings, store

__all__ = ["env", "rmsnorm", "settings", "store"]  # fixtures


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    with Store(tmp_path / "fast.db") as db:
        yield Bench(db, tmp_path / "sessions")


@pytest.fixture
def open_search_on(store: Store, settings: Settings, rmsnorm: Task):
    opened: list[OpenSearch] = []

    async def opener(provider, *, resume: str | None = None, **config) -> OpenSearch:
        search = await open_search(
            store,
            settings,
            task=None if resume else rmsnorm,
            config=None if resume else SearchConfig(**config),
            resume=resume,
            provider=provider,
        )
        service = search.session.tools.service  # one seed tells the kernels apart here
        service.options = replace(service.options, seeds=1)
        opened.append(search)
        return search

    yield opener
    for search in opened:
        search.session.tools.close()
