"""Fake model servers on 127.0.0.1, providers pointed at them, and a client that never really sleeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from maxkernel_tui.agents.budget import Budget
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.gemini import GeminiProvider
from maxkernel_tui.agents.llm.openai_compat import OpenAICompatProvider
from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.llm.retry import RetryPolicy
from maxkernel_tui.agents.llm.types import Message, Request
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.scripted import ScriptedServer

GEMINI_KEY = "gemini-test-key-0123456789"
OPENAI_KEY = "sk-openai-test-key-0123456789"


class FakeSleep:
    """Records the waits it is asked for and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@dataclass
class Harness:
    server: ScriptedServer
    provider: Provider
    sleep: FakeSleep = field(default_factory=FakeSleep)
    events: list[Any] = field(default_factory=list)

    def client(self, budget: Budget | None = None, **policy: Any) -> LLMClient:
        return LLMClient(
            self.provider,
            budget=budget,
            policy=RetryPolicy(**policy),
            on_event=self.events.append,
            sleep=self.sleep,
        )


def ask(text: str = "Say hello.", **kwargs: Any) -> Request:
    return Request(messages=(Message("user", text),), system="You are terse.", **kwargs)


async def collect(chunks: AsyncIterator[Any]) -> list[Any]:
    return [chunk async for chunk in chunks]


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
