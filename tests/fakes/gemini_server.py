"""A fake Gemini API for the real google-genai client: `POST /v1*/[...]/models/<m>:generateContent`
and `:streamGenerateContent?alt=sse` (v1, v1beta, and Vertex's longer paths all match)."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from tests.fakes.scripted import Answer, Fail, ScriptedServer, Seen

_PATH = re.compile(
    r"^/v1[^/]*/(?:.*/)?models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
_FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}


class FakeGemini(ScriptedServer):
    def routes(self) -> list[web.RouteDef]:
        return [web.post("/{path:.*}", self._route)]

    async def _route(self, request: web.Request) -> web.StreamResponse:
        match = _PATH.match(request.path)
        if match is None:
            return web.json_response(
                {"error": {"code": 404, "message": f"no route {request.path}"}}, status=404
            )
        stream = match["method"] == "streamGenerateContent"
        assert not stream or request.query.get("alt") == "sse"
        return await self.handle(request, stream)

    def error_body(self, fail: Fail) -> dict[str, Any]:
        status = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 400: "INVALID_ARGUMENT"}.get(
            fail.status, "UNKNOWN"
        )
        error: dict[str, Any] = {"code": fail.status, "message": fail.message, "status": status}
        if fail.details:
            error["details"] = fail.details
        return {"error": error}

    def render(self, answer: Answer, stream: bool, seen: Seen) -> Any:
        calls = [{"functionCall": {"name": name, "args": args}} for name, args in answer.tool_calls]
        usage = {
            "promptTokenCount": answer.usage[0],
            "candidatesTokenCount": answer.usage[1],
            "totalTokenCount": sum(answer.usage),
        }
        finish = (
            {"finishReason": _FINISH.get(answer.finish, answer.finish)} if answer.finish else {}
        )
        if not stream:
            parts = ([{"text": "".join(answer.pieces)}] if answer.pieces else []) + calls
            return {
                "candidates": [
                    {"content": {"role": "model", "parts": parts}, "index": 0, **finish}
                ],
                "usageMetadata": usage,
            }
        events: list[dict[str, Any]] = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}]}
            for piece in answer.pieces
        ]
        if calls or not events:
            events.append(
                {"candidates": [{"content": {"role": "model", "parts": calls}, "index": 0}]}
            )
        events[-1]["candidates"][0].update(finish)
        if answer.finish:
            events[-1]["usageMetadata"] = usage
        return events
