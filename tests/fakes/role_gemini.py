"""A fake Gemini server that answers each sub-agent from its own queue (told apart by the system
prompt), served from a thread so that a `maxkernel-tui` subprocess can call it."""

from __future__ import annotations

import asyncio
import re
import threading
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping

from aiohttp import web

from tests.fakes.gemini_server import FakeGemini
from tests.fakes.scripted import Answer

_ROLE = re.compile(r"You are the (\w+)|You answer a kernel engineer")


def role_of(body: dict) -> str:
    text = " ".join(
        part.get("text", "") for part in body.get("systemInstruction", {}).get("parts", [])
    )
    match = _ROLE.search(text)
    return "explainer" if match and match[1] is None else (match[1] if match else "?")


def streamed(text: str, size: int = 120) -> Answer:
    return Answer(
        [text[i : i + size] for i in range(0, len(text), size)], usage=(900, len(text) // 4)
    )


class RoleGemini(FakeGemini):
    def __init__(self, answers: Mapping[str, Iterable[str]]) -> None:
        super().__init__()
        self.by_role = defaultdict(deque, {role: deque(texts) for role, texts in answers.items()})
        self.roles: list[str] = []  # the role of each request, in order

    async def handle(self, request: web.Request, stream: bool) -> web.StreamResponse:
        role = role_of(await request.json())
        self.roles.append(role)
        if self.by_role[role]:
            self.script.append(streamed(self.by_role[role].popleft()))
        return await super().handle(request, stream)


class ServedInThread:
    """Runs a scripted server on its own event loop in a daemon thread."""

    def __init__(self, server: FakeGemini) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeGemini:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
