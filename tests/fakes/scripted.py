"""A scripted HTTP model server on 127.0.0.1 for tests: each request takes the next reply.

Replies are protocol-neutral (`Answer`, `Fail`, `Cut`, `Hang`); a subclass renders them in its
API's shapes, plain JSON or server-sent events. Every request is logged, so a test can count
what reached the server.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Answer:
    pieces: list[str] = field(default_factory=lambda: ["Hello"])  # one SSE event each
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(
        default_factory=list
    )  # str: raw arguments
    finish: str | None = "stop"  # None: the answer ends without a finish marker
    usage: tuple[int, int] = (11, 7)


@dataclass
class Fail:
    status: int
    message: str = "scripted failure"
    retry_after: str | None = None
    details: list[dict[str, Any]] | None = None


@dataclass
class Cut:
    """Stream the first `after` events of `answer`, then drop the connection."""

    answer: Answer = field(default_factory=Answer)
    after: int = 1


@dataclass
class Hang:
    """Stream the first `after` events, then wait until the client goes away."""

    answer: Answer = field(default_factory=Answer)
    after: int = 1


Reply = Answer | Fail | Cut | Hang


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]


class ScriptedServer:
    def __init__(self, *replies: Reply) -> None:
        self.script: deque[Reply] = deque(replies)
        self.requests: list[Seen] = []
        self.disconnected = asyncio.Event()  # a Hang's client went away
        self._runner: web.AppRunner | None = None
        self.url = ""

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    def render(self, answer: Answer, stream: bool, seen: Seen) -> Any:
        """The JSON body of a plain answer, or the list of SSE event payloads of a streamed one."""
        raise NotImplementedError

    def error_body(self, fail: Fail) -> dict[str, Any]:
        raise NotImplementedError

    async def start(self) -> ScriptedServer:
        app = web.Application()
        app.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def handle(self, request: web.Request, stream: bool) -> web.StreamResponse:
        seen = Seen(request.path, dict(request.query), dict(request.headers), await request.json())
        self.requests.append(seen)
        if not self.script:
            return web.json_response(
                self.error_body(Fail(500, "fake server: no scripted reply left")), status=500
            )
        reply = self.script.popleft()
        if isinstance(reply, Fail):
            headers = {"Retry-After": reply.retry_after} if reply.retry_after else {}
            return web.json_response(self.error_body(reply), status=reply.status, headers=headers)
        answer = reply if isinstance(reply, Answer) else reply.answer
        if not stream:
            return web.json_response(self.render(answer, False, seen))
        events = self.render(answer, True, seen)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        count = reply.after if isinstance(reply, (Cut, Hang)) else len(events)
        for event in events[:count]:
            payload = event if isinstance(event, str) else json.dumps(event)
            await response.write(f"data: {payload}\n\n".encode())
        if isinstance(reply, Cut):
            assert request.transport is not None
            request.transport.abort()  # no terminating chunk: the body is incomplete
        elif isinstance(reply, Hang):
            await self._wait_for_disconnect(request)
        else:
            await response.write_eof()
        return response

    async def _wait_for_disconnect(self, request: web.Request) -> None:
        # Nothing more is written (the Gemini client reads any non-"data:" line as JSON); the
        # client's closing the connection shows as the transport going away.
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.01)
        self.disconnected.set()
