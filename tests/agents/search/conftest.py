"""Searches on 12p_RMSNorm with a real store, the real harness and profiler, and a provider that
answers each role from its own queue. Kernels differ by their row block, so they are distinct
kernels with distinct estimated speedups."""

from __future__ import annotations

from dataclasses import replace

import pytest

from maxkernel_tui.agents.orchestration.events import SearchNodeChanged, decode
from maxkernel_tui.agents.roles.tunables import set_tunables
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.launch import OpenSearch, open_search
from maxkernel_tui.config import Settings
from maxkernel_tui.store.db import Store
from tests.agents.orchestration.conftest import (  # noqa: F401
    BAD,
    GOOD,
    kernel,
    rmsnorm,
    settings,
    store,
)

__all__ = ["BAD", "GOOD", "graph_from_events", "graph_in_store", "kernel", "variant"]


def variant(rows: int) -> str:
    """The good kernel with another row block: another kernel, another estimate."""
    return kernel(set_tunables(GOOD, {"BLOCK_ROWS": rows}))


def graph_from_events(db: Store, session_id: str) -> dict[str, tuple]:
    """Each node as its last SearchNodeChanged event says it is."""
    last: dict[str, tuple] = {}
    for row in db.events(session_id):
        if row.kind == SearchNodeChanged.kind:
            event = decode(row.kind, row.payload)
            last[event.node] = (
                event.status,
                event.score,
                tuple(event.parents),
                event.strategy,
                event.version_id,
            )
    return last


def graph_in_store(db: Store, session_id: str) -> dict[str, tuple]:
    return {
        n.data["ref"]: (
            n.status,
            n.score,
            tuple(n.data["parents"]),
            n.strategy,
            n.kernel_version_id,
        )
        for n in db.search_nodes(session_id)
    }


@pytest.fixture
def open_search_on(store: Store, settings: Settings, rmsnorm):  # noqa: F811
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
        tools = search.session.engine.tools
        tools.options = replace(
            tools.options, seeds=1
        )  # one seed is enough to tell the kernels apart here
        opened.append(search)
        return search

    yield opener
    for search in opened:
        search.session.engine.tools.close()
