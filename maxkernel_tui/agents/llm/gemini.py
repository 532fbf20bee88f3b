"""Gemini through the real `google-genai` async client (Gemini API key or Vertex AI).

The client reads its own environment: `GEMINI_API_KEY` / `GOOGLE_API_KEY`, or
`GOOGLE_GENAI_USE_VERTEXAI` with `GOOGLE_CLOUD_PROJECT` and `GOOGLE_CLOUD_LOCATION`, and
`GOOGLE_GEMINI_BASE_URL`; a `base_url` given here becomes `HttpOptions(base_url=...)` and wins.
The SDK's own retries are switched off (one attempt per call): `LLMClient` owns retries, so
waits are announced as events and never happen silently inside the SDK. `google.genai` is
imported on first use, not at start-up (it costs about half a second).
"""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from contextlib import aclosing
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from maxkernel_tui.agents.llm.errors import (
    MalformedOutput,
    ProviderConfigError,
    ProviderError,
    StreamBroken,
    redact,
)
from maxkernel_tui.agents.llm.retry import RETRYABLE_STATUSES, retry_after_from
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

_KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_LOCAL_ID = "local-call-"  # ids we made up for calls that came without one: never sent back
_FILTERED = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "LANGUAGE",
    "IMAGE_SAFETY",
}


def gemini_credentials(env: Mapping[str, str] = os.environ) -> str | None:
    """How the client would authenticate, in words without the secret; None: it cannot."""
    if env.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true"):
        if env.get("GOOGLE_CLOUD_PROJECT") and env.get("GOOGLE_CLOUD_LOCATION"):
            return (
                f"Vertex AI (project {env['GOOGLE_CLOUD_PROJECT']}, location "
                f"{env['GOOGLE_CLOUD_LOCATION']}, application default credentials)"
            )
        if any(env.get(v) for v in _KEY_VARIABLES):
            return "Vertex AI express mode (API key)"
        return None
    found = next((v for v in _KEY_VARIABLES if env.get(v)), None)
    return f"Gemini API key from {found}" if found else None


def _contents(messages: Iterable[Message]) -> list[Any]:
    from google.genai import types

    contents: list[Any] = []
    for m in messages:
        if m.role == Speaker.TOOL:
            role = "user"
            parts = [
                types.Part(
                    function_response=types.FunctionResponse(
                        id=None
                        if (m.tool_call_id or _LOCAL_ID).startswith(_LOCAL_ID)
                        else m.tool_call_id,
                        name=m.name,
                        response={"result": m.content},
                    )
                )
            ]
        else:
            role = "model" if m.role == Speaker.ASSISTANT else "user"
            parts = [types.Part(text=m.content)] if m.content else []
            parts += [
                types.Part(
                    function_call=types.FunctionCall(name=c.name, args=c.arguments),
                    thought_signature=base64.b64decode(c.signature) if c.signature else None,
                )
                for c in m.tool_calls
            ]
        # Consecutive turns of one role merge: parallel tool results must share one turn.
        if contents and contents[-1].role == role:
            contents[-1].parts.extend(parts)
        else:
            contents.append(types.Content(role=role, parts=parts))
    return contents


def _config(request: Request) -> Any:
    from google.genai import types

    config = types.GenerateContentConfig(
        system_instruction=request.system or None,
        temperature=request.temperature,
        max_output_tokens=request.max_tokens,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    if request.tools:
        config.tools = [
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name=t.name, description=t.description, parameters_json_schema=t.parameters
                    )
                    for t in request.tools
                ]
            )
        ]
    if request.json_schema is not None:
        config.response_mime_type = "application/json"
        config.response_json_schema = request.json_schema
    return config


@dataclass(frozen=True)
class _Auth:
    """How the client authenticates: a key, or Vertex AI with a project and location; what is
    None is left to google-genai (which reads the environment)."""

    api_key: str | None
    vertexai: bool | None
    project: str | None
    location: str | None

    def client_options(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class GeminiProvider:
    name = "gemini"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        vertexai: bool | None = None,
        project: str | None = None,
        location: str | None = None,
    ) -> None:
        self.model = model
        self._base_url, self._api_version = base_url, api_version
        self._auth = _Auth(api_key, vertexai, project, location)
        self._client: Any = None
        self._call_ids = itertools.count(1)

    def __repr__(self) -> str:  # no key in logs
        return f"GeminiProvider(model={self.model!r}, base_url={self._base_url!r})"

    def _secrets(self) -> list[str | None]:
        return [self._auth.api_key, *(os.environ.get(v) for v in _KEY_VARIABLES)]

    def _genai(self) -> Any:
        if self._client is None:
            if not self._auth.api_key and not self._auth.vertexai and gemini_credentials() is None:
                raise ProviderConfigError(
                    "Gemini is not configured: set GEMINI_API_KEY (or GOOGLE_API_KEY), or use "
                    "Vertex AI with GOOGLE_GENAI_USE_VERTEXAI=true, GOOGLE_CLOUD_PROJECT and "
                    "GOOGLE_CLOUD_LOCATION."
                )
            from google import genai
            from google.auth.exceptions import GoogleAuthError
            from google.genai import types

            options = types.HttpOptions(
                base_url=self._base_url,
                api_version=self._api_version,
                retry_options=types.HttpRetryOptions(attempts=1),
            )
            try:
                self._client = genai.Client(http_options=options, **self._auth.client_options())
            except (
                ValueError,
                GoogleAuthError,
            ) as e:  # missing key or project, no default credentials
                raise ProviderConfigError(
                    redact(f"cannot set up the Gemini client: {e}", self._secrets())
                ) from None
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aio.aclose()

    async def stream(self, request: Request) -> AsyncGenerator[ProviderChunk, None]:
        from google.genai import errors

        client = self._genai()
        model = request.model or self.model
        started = False
        try:
            contents, config = _contents(request.messages), _config(request)
            if request.stream:
                replies = await client.aio.models.generate_content_stream(
                    model=model, contents=contents, config=config
                )
            else:
                replies = _one(
                    await client.aio.models.generate_content(
                        model=model, contents=contents, config=config
                    )
                )
            reader = _Reader(self._call_ids)
            async with aclosing(replies) as replies:
                async for reply in replies:
                    started = True
                    for chunk in reader.read(reply):
                        yield chunk
            for chunk in reader.end():
                yield chunk
        except errors.APIError as e:
            raise ProviderError(
                redact(
                    f"HTTP {e.code} {e.status or ''}: {e.message or e.details}", self._secrets()
                ),
                status=e.code,
                retryable=e.code in RETRYABLE_STATUSES,
                retry_after_s=retry_after_from(getattr(e.response, "headers", None), e.details),
            ) from None
        except (aiohttp.ClientError, errors.UnknownApiResponseError, OSError) as e:
            message = redact(f"{type(e).__name__}: {e}", self._secrets())
            if started:
                raise StreamBroken(f"the answer broke off: {message}") from None
            raise ProviderError(f"cannot reach Gemini: {message}", retryable=True) from None


async def _one(reply: Any) -> AsyncGenerator[Any, None]:
    yield reply


class _Reader:
    """Turns GenerateContentResponse objects into chunks; remembers usage and finish."""

    def __init__(self, call_ids: Iterator[int]) -> None:
        self._call_ids = call_ids
        self._tokens: TokenCount | None = None
        self._finish: str | None = None
        self._called = False

    def read(self, reply: Any) -> list[ProviderChunk]:
        out: list[ProviderChunk] = []
        if reply.usage_metadata is not None:
            u = reply.usage_metadata
            # Thinking tokens are billed as output; tool-use prompt tokens as input.
            self._tokens = TokenCount(
                (u.prompt_token_count or 0) + (u.tool_use_prompt_token_count or 0),
                (u.candidates_token_count or 0) + (u.thoughts_token_count or 0),
            )
        if not reply.candidates:
            if reply.prompt_feedback is not None and reply.prompt_feedback.block_reason:
                self._finish = "filtered"
            return out
        candidate = reply.candidates[0]
        for part in (candidate.content.parts or []) if candidate.content else []:
            if part.thought:
                continue
            if part.function_call is not None:
                self._called = True
                call = part.function_call
                signature = (
                    base64.b64encode(part.thought_signature).decode()
                    if part.thought_signature
                    else None
                )
                out.append(
                    ToolCallChunk(
                        ToolCall(
                            call.id or f"{_LOCAL_ID}{next(self._call_ids)}",
                            call.name or "",
                            dict(call.args or {}),
                            signature,
                        )
                    )
                )
            elif part.text:
                out.append(TextDelta(part.text))
        if candidate.finish_reason is not None:
            reason = str(getattr(candidate.finish_reason, "value", candidate.finish_reason))
            if reason == "MALFORMED_FUNCTION_CALL":
                raise MalformedOutput(
                    "the model produced a malformed function call", candidate.finish_message or ""
                )
            self._finish = {"STOP": "stop", "MAX_TOKENS": "length"}.get(
                reason, "filtered" if reason in _FILTERED else f"other:{reason}"
            )
        return out

    def end(self) -> list[ProviderChunk]:
        if self._finish is None:
            raise StreamBroken("the answer ended before the model finished (no finish reason)")
        out: list[ProviderChunk] = [self._tokens] if self._tokens else []
        return out + [
            Finish("tool_calls" if self._called and self._finish == "stop" else self._finish)
        ]
