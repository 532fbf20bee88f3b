"""The transcript file: one JSON object per line, written as each provider call ends.

    {"transcript": 1, "provider": "gemini", "model": "gemini-3.5-flash"}
    {"fingerprint": "...", "request": {...}, "chunks": [{"text": "Hel"}, ...], "error": null,
     "cancelled": false}

A call holds the provider-level chunks exactly as they came and, when the call failed, the
error (429s, broken streams and all), so a replay takes the same retries. Requests are
recorded for reading and matching; no credentials are ever part of one. Each line is read once
into a typed object (`Header`, `RecordedCall`). No jax.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.llm.errors import (
    LLMError,
    MalformedOutput,
    ProviderError,
    StreamBroken,
)
from maxkernel_tui.agents.llm.types import (
    Finish,
    ProviderChunk,
    Request,
    TextDelta,
    TokenCount,
    ToolCall,
    ToolCallChunk,
)

VERSION = 1


def fingerprint(request: Request) -> str:
    return hashlib.sha256(json.dumps(asdict(request), sort_keys=True).encode()).hexdigest()[:16]


def chunk_to_json(chunk: ProviderChunk) -> dict[str, Any]:
    if isinstance(chunk, TextDelta):
        return {"text": chunk.text}
    if isinstance(chunk, ToolCallChunk):
        return {"tool_call": asdict(chunk.call)}
    if isinstance(chunk, TokenCount):
        return {"tokens": [chunk.prompt_tokens, chunk.completion_tokens]}
    return {"finish": chunk.reason}


def chunk_from_json(data: dict[str, Any]) -> ProviderChunk:
    match data:
        case {"text": str(text)}:
            return TextDelta(text)
        case {"tool_call": dict(call)}:
            return ToolCallChunk(ToolCall(**call))
        case {"tokens": [int(prompt), int(completion)]}:
            return TokenCount(prompt, completion)
        case {"finish": str(reason)}:
            return Finish(reason)
    raise ValueError(f"not a recorded chunk: {str(data)[:200]}")


def error_to_json(error: LLMError) -> dict[str, Any]:
    data: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, ProviderError):
        data.update(
            status=error.status, retryable=error.retryable, retry_after_s=error.retry_after_s
        )
    if isinstance(error, MalformedOutput):
        data.update(raw=error.raw)
    return data


def error_from_json(data: dict[str, Any]) -> LLMError:
    match data:
        case {"type": "StreamBroken", "message": str(message)}:
            return StreamBroken(message)
        case {"type": "MalformedOutput", "message": str(message), "raw": str(raw)}:
            return MalformedOutput(message, raw)
        case {"message": str(message)}:
            return ProviderError(
                message,
                status=data.get("status"),
                retryable=data.get("retryable", False),
                retry_after_s=data.get("retry_after_s"),
            )
    raise ValueError(f"not a recorded error: {str(data)[:200]}")


@dataclass(frozen=True)
class Header:
    """The first line of a transcript: which provider and model recorded it."""

    provider: str
    model: str

    def to_json(self) -> dict[str, Any]:
        return {"transcript": VERSION, "provider": self.provider, "model": self.model}

    @classmethod
    def from_json(cls, data: Any, path: Path) -> Header:
        match data:
            case {"transcript": 1, "provider": str(provider), "model": str(model)}:
                return cls(provider, model)
        raise ValueError(
            f"{path} is not a version-{VERSION} transcript (its first line must be the header)"
        )


@dataclass(frozen=True)
class RecordedCall:
    """One provider call as it was recorded: its chunks, and its error when it failed."""

    fingerprint: str
    chunks: tuple[ProviderChunk, ...]
    error: LLMError | None
    cancelled: bool

    @classmethod
    def from_json(cls, data: Any) -> RecordedCall:
        match data:
            case {
                "fingerprint": str(fingerprint),
                "chunks": list(chunks),
                "error": error,
                "cancelled": bool(cancelled),
            }:
                return cls(
                    fingerprint,
                    tuple(chunk_from_json(c) for c in chunks),
                    error_from_json(error) if error else None,
                    cancelled,
                )
        raise ValueError(f"not a recorded call: {str(data)[:200]}")


def append_call(
    path: Path,
    provider: str,
    model: str,
    request: Request,
    chunks: list[ProviderChunk],
    error: LLMError | None,
    cancelled: bool,
) -> None:
    """Append one call, with the header first when the file is new; flushed at once, so a
    crash loses at most the call in flight."""
    lines = []
    if not path.exists() or path.stat().st_size == 0:
        lines.append(Header(provider, model).to_json())
    lines.append(
        {
            "fingerprint": fingerprint(request),
            "request": asdict(request),
            "chunks": [chunk_to_json(c) for c in chunks],
            "error": error_to_json(error) if error else None,
            "cancelled": cancelled,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))


def read_transcript(path: Path) -> tuple[Header, list[RecordedCall]]:
    lines = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    header = Header.from_json(lines[0] if lines else None, path)
    return header, [RecordedCall.from_json(line) for line in lines[1:]]
