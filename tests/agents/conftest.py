"""Fixtures: fake model servers on 127.0.0.1 and providers pointed at them (the harness and its
client that never really sleeps are in tests/support/llm.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from maxkernel_tui.agents.llm.gemini import GeminiProvider
from maxkernel_tui.agents.llm.openai_compat import OpenAICompatProvider
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI
from tests.support.llm import GEMINI_KEY, OPENAI_KEY, Harness


async def _harness(kind: str, model: str) -> Harness:
    if kind == "gemini":
        server = await FakeGemini().start()
        return Harness(server, GeminiProvider(model, base_url=server.url, api_key=GEMINI_KEY))
    server = await FakeOpenAI().start()
    return Harness(server, OpenAICompatProvider(model, f"{server.url}/v1", api_key=OPENAI_KEY))


@pytest.fixture(params=["gemini", "openai"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    harness = await _harness(
        request.param, "gemini-2.5-flash" if request.param == "gemini" else "local-coder"
    )
    yield harness
    await harness.provider.aclose()
    await harness.server.stop()


@pytest.fixture
async def gemini() -> AsyncIterator[Harness]:
    harness = await _harness("gemini", "gemini-2.5-flash")
    yield harness
    await harness.provider.aclose()
    await harness.server.stop()


@pytest.fixture
async def openai() -> AsyncIterator[Harness]:
    harness = await _harness("openai", "local-coder")
    yield harness
    await harness.provider.aclose()
    await harness.server.stop()
