"""Fake Gemini and OpenAI-compatible servers that answer each sub-agent from its own queue (told
apart by the system prompt), served from a thread so that a `maxkernel-tui` subprocess can call
them. A queue holds texts (streamed), whole `Answer`s (tool calls, say) or `Fail`s (an HTTP
error)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from aiohttp import web

from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.scripted import Answer, Fail, ScriptedServer

_ROLE = re.compile(r"You are the (\w+)|You answer a kernel engineer")


def _system_text(body: dict[str, Any]) -> str:
    gemini = body.get("systemInstruction", {}).get("parts", [])
    openai = [m for m in body.get("messages", []) if m.get("role") == "system"]
    return " ".join(part.get("text", "") for part in gemini) + " ".join(
        str(m.get("content", "")) for m in openai
    )


def role_of(body: dict[str, Any]) -> str:
    match = _ROLE.search(_system_text(body))
    return "explainer" if match and match[1] is None else (match[1] if match else "?")


def streamed(text: str, size: int = 120) -> Answer:
    return Answer(
        [text[i : i + size] for i in range(0, len(text), size)], usage=(900, len(text) // 4)
    )


Scripted = str | Answer | Fail


class _ByRole(ScriptedServer):
    """Each request takes the next reply of its role's queue; `roles` and `bodies` record them."""

    def __init__(self, answers: Mapping[str, Iterable[Scripted]]) -> None:
        super().__init__()
        self.by_role = defaultdict(deque, {role: deque(items) for role, items in answers.items()})
        self.roles: list[str] = []  # the role of each request, in order
        self.bodies: list[dict[str, Any]] = []

    async def handle(self, request: web.Request, stream: bool) -> web.StreamResponse:
        body = await request.json()
        role = role_of(body)
        self.roles.append(role)
        self.bodies.append(body)
        if self.by_role[role]:
            item = self.by_role[role].popleft()
            self.script.append(streamed(item) if isinstance(item, str) else item)
        return await super().handle(request, stream)

    def bodies_of(self, role: str) -> list[dict[str, Any]]:
        return [body for body, r in zip(self.bodies, self.roles) if r == role]


class RoleGemini(_ByRole, FakeGemini):
    pass


class RoleOpenAI(_ByRole, FakeOpenAI):
    pass


S = TypeVar("S", bound=ScriptedServer)


class ServedInThread(Generic[S]):
    """Runs a scripted server on its own event loop in a daemon thread."""

    def __init__(self, server: S) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> S:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
