"""What the provider and client tests share: test keys, a sleep that never sleeps, a harness of a
fake server and a provider pointed at it, and small helpers to ask and to collect a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from maxkernel_tui.agents.budget import Budget
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.events import LLMEvent
from maxkernel_tui.agents.llm.gemini import GeminiProvider
from maxkernel_tui.agents.llm.openai_compat import OpenAICompatProvider
from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.llm.retry import RetryPolicy
from maxkernel_tui.agents.llm.types import Message, Request
from tests.fakes.role_gemini import RoleGemini, RoleOpenAI, Scripted
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
    """A fake server, a provider pointed at it, and what the clients it makes reported."""

    server: ScriptedServer
    provider: Provider
    sleep: FakeSleep = field(default_factory=FakeSleep)
    events: list[LLMEvent] = field(default_factory=list)

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


Served = RoleGemini | RoleOpenAI


async def serve(
    kind: str, answers: Mapping[str, list[Scripted]], model: str = "gemini-2.5-flash"
) -> tuple[Served, Provider]:
    """A fake Gemini or OpenAI-compatible server answering each role from its queue, and a
    provider pointed at it."""
    if kind == "gemini":
        gemini = await RoleGemini(answers).start()
        return gemini, GeminiProvider(model, base_url=gemini.url, api_key=GEMINI_KEY)
    openai = await RoleOpenAI(answers).start()
    return openai, OpenAICompatProvider(model, f"{openai.url}/v1", api_key=OPENAI_KEY)
