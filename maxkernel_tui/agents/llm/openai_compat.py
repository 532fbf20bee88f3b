"""Any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp server, OpenAI itself).

`POST {base_url}/chat/completions`, where `base_url` ends in the API version as those servers
document it (`http://127.0.0.1:8000/v1`). Streaming reads SSE until `data: [DONE]`; tool-call
arguments arrive in pieces and are emitted whole, once the stream has completed. A key is sent
only when one is configured: a local server never sees the user's cloud credentials.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import aiohttp

from maxkernel_tui.agents.llm.errors import (
    ProviderError,
    StreamBroken,
    redact,
)
from maxkernel_tui.agents.llm.retry import RETRYABLE_STATUSES, retry_after_from
from maxkernel_tui.agents.llm.sse import sse_data
from maxkernel_tui.agents.llm.types import (
    Finish,
    Message,
    ProviderChunk,
    Request,
    Speaker,
    TextDelta,
    TokenCount,
    ToolCall,
    ToolCallChunk,
)

_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "filtered",
}


def _message(m: Message) -> dict[str, Any]:
    if m.role == Speaker.TOOL:
        return {"role": m.role, "tool_call_id": m.tool_call_id, "content": m.content}
    if not m.tool_calls:
        return {"role": m.role, "content": m.content}
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
        }
        for c in m.tool_calls
    ]
    return {"role": m.role, "content": m.content or None, "tool_calls": calls}


def request_body(request: Request, model: str) -> dict[str, Any]:
    system = [{"role": "system", "content": request.system}] if request.system else []
    tools = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in request.tools
    ]
    schema = request.json_schema
    optional = {
        "stream_options": {"include_usage": True} if request.stream else None,
        "temperature": request.temperature,
        "tools": tools or None,
        "response_format": None
        if schema is None
        else {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    }
    return {
        "model": model,
        "messages": system + [_message(m) for m in request.messages],
        "max_tokens": request.max_tokens,
        "stream": request.stream,
    } | {key: value for key, value in optional.items() if value is not None}


@dataclass
class _PartialCall:
    """A tool call as its streamed pieces arrive."""

    id: str = ""
    name: str = ""
    arguments: str = ""

    def add(self, piece: dict[str, Any]) -> None:
        function = piece.get("function") or {}
        self.id = piece.get("id") or self.id
        self.name += function.get("name") or ""
        self.arguments += function.get("arguments") or ""

    def call(self, index: int) -> ToolCall:
        """The call; one whose arguments cannot be read is kept, marked malformed, so that the
        model gets the error as the call's result (a re-ask could not name the call)."""
        call_id = self.id or f"call_{index}"
        try:
            arguments = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as e:
            why = f"the arguments of tool call {self.name!r} are not valid JSON: {e}"
            return ToolCall(call_id, self.name, {}, malformed=f"{why}: {self.arguments[:300]!r}")
        if not isinstance(arguments, dict):
            why = f"the arguments of tool call {self.name!r} are not a JSON object"
            return ToolCall(call_id, self.name, {}, malformed=f"{why}: {self.arguments[:300]!r}")
        return ToolCall(call_id, self.name, arguments)


class _ToolCallParts:
    """Tool calls assembled from streamed pieces, keyed by their index."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, pieces: list[dict[str, Any]]) -> None:
        for piece in pieces:
            index = piece.get("index", len(self._calls))
            self._calls.setdefault(index, _PartialCall()).add(piece)

    def calls(self) -> list[ToolCall]:
        return [call.call(index) for index, call in sorted(self._calls.items())]


class OpenAICompatProvider:
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        # A key is sent only when one is configured.
        authorization = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._headers = {"Content-Type": "application/json", **(headers or {}), **authorization}
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # no key in logs
        return f"OpenAICompatProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _get_session(self) -> aiohttp.ClientSession:
        # A session belongs to the loop that made it; tests and the CLI may run several loops.
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30)
            )
            self._session_loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def _error(self, message: str) -> str:
        return redact(message, [self._api_key])

    async def stream(self, request: Request) -> AsyncGenerator[ProviderChunk, None]:
        url = f"{self.base_url}/chat/completions"
        body = request_body(request, request.model or self.model)
        try:
            response = await self._get_session().post(url, json=body, headers=self._headers)
        except aiohttp.ClientError as e:
            raise ProviderError(self._error(f"cannot reach {url}: {e}"), retryable=True) from None
        complete = False
        try:
            if response.status != 200:
                raise await self._status_error(response)
            if request.stream:
                async with aclosing(self._read_stream(response)) as chunks:
                    async for chunk in chunks:
                        yield chunk
            else:
                for chunk in self._read_answer(await response.json(content_type=None)):
                    yield chunk
            complete = True
        except aiohttp.ClientError as e:
            raise StreamBroken(self._error(f"the answer from {url} broke off: {e!r}")) from None
        except json.JSONDecodeError as e:
            raise ProviderError(f"the answer from {url} is not JSON: {e}", retryable=True) from None
        finally:
            # An unfinished body (cancelled, cut) closes the connection instead of pooling it.
            if complete:
                response.release()
            else:
                response.close()

    async def _status_error(self, response: aiohttp.ClientResponse) -> ProviderError:
        text = await response.text()
        try:
            body: Any = json.loads(text)
            error = body.get("error", body) if isinstance(body, dict) else body
            detail = error.get("message", text) if isinstance(error, dict) else text
        except json.JSONDecodeError:
            body, detail = None, text
        return ProviderError(
            self._error(f"HTTP {response.status} from {response.url}: {str(detail)[:500]}"),
            status=response.status,
            retryable=response.status in RETRYABLE_STATUSES,
            retry_after_s=retry_after_from(response.headers, body),
        )

    async def _read_stream(
        self, response: aiohttp.ClientResponse
    ) -> AsyncGenerator[ProviderChunk, None]:
        calls, finish, usage, done = _ToolCallParts(), None, None, False
        async with aclosing(sse_data(response.content)) as events:
            async for data in events:
                if data.strip() == "[DONE]":
                    done = True
                    break
                try:
                    event = json.loads(data)
                except json.JSONDecodeError as e:
                    raise StreamBroken(
                        f"an event of the answer is not JSON ({e}): {data[:200]}"
                    ) from None
                if (error := event.get("error")) is not None:
                    raise ProviderError(
                        self._error(f"the server reported an error mid-answer: {error}"),
                        retryable=True,
                    )
                usage = event.get("usage") or usage
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if text := delta.get("content"):
                        yield TextDelta(text)
                    calls.add(delta.get("tool_calls") or [])
                    finish = choice.get("finish_reason") or finish
        if not done and finish is None:
            raise StreamBroken(
                "the answer ended before the model finished (no finish reason, no [DONE])"
            )
        for chunk in self._ending(calls.calls(), finish, usage):
            yield chunk

    def _read_answer(self, body: dict[str, Any]) -> list[ProviderChunk]:
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = _ToolCallParts()
        calls.add([{"index": i, **c} for i, c in enumerate(message.get("tool_calls") or [])])
        content = message.get("content")
        text: list[ProviderChunk] = [TextDelta(content)] if content else []
        return text + self._ending(calls.calls(), choice.get("finish_reason"), body.get("usage"))

    @staticmethod
    def _ending(
        calls: list[ToolCall], finish: str | None, usage: dict[str, Any] | None
    ) -> list[ProviderChunk]:
        out: list[ProviderChunk] = [ToolCallChunk(c) for c in calls]
        if usage:
            out.append(
                TokenCount(
                    int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
                )
            )
        reason = _FINISH.get(finish or "stop", f"other:{finish}")
        out.append(Finish("tool_calls" if calls else reason))
        return out
