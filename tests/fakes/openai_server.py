"""A fake OpenAI-compatible server: `POST /v1/chat/completions`, plain JSON or SSE ending in
`data: [DONE]`, tool-call arguments streamed in two pieces as real servers do."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.fakes.scripted import Answer, Fail, ScriptedServer, Seen


class FakeOpenAI(ScriptedServer):
    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self._route)]

    async def _route(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return await self.handle(request, bool(body.get("stream")))

    def error_body(self, fail: Fail) -> dict[str, Any]:
        return {"error": {"message": fail.message, "type": "server_error", "code": fail.status}}

    def render(self, answer: Answer, stream: bool, seen: Seen) -> Any:
        calls = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for i, (name, args) in enumerate(answer.tool_calls)
        ]
        finish = ("tool_calls" if calls else answer.finish) if answer.finish else None
        usage = {
            "prompt_tokens": answer.usage[0],
            "completion_tokens": answer.usage[1],
            "total_tokens": sum(answer.usage),
        }
        if not stream:
            message = {"role": "assistant", "content": "".join(answer.pieces) or None}
            if calls:
                message["tool_calls"] = calls
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": seen.body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        events: list[Any] = [
            {"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in answer.pieces
        ]
        for i, call in enumerate(calls):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            events.append(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": i,
                                        "id": call["id"],
                                        "type": "function",
                                        "function": {
                                            "name": call["function"]["name"],
                                            "arguments": arguments[:half],
                                        },
                                    }
                                ]
                            },
                        }
                    ]
                }
            )
            events.append(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": i, "function": {"arguments": arguments[half:]}}
                                ]
                            },
                        }
                    ]
                }
            )
        if finish:
            events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            events.append({"choices": [], "usage": usage})
            events.append("[DONE]")
        return events
