"""The transcript file: one JSON object per line, written as each provider call ends.

    {"transcript": 1, "provider": "gemini", "model": "gemini-3.5-flash"}
    {"fingerprint": "...", "request": {...}, "chunks": [{"text": "Hel"}, ...], "error": null, "cancelled": false}

A call holds the provider-level chunks exactly as they came and, when the call failed, the
error (429s, broken streams and all), so a replay takes the same retries. Requests are
recorded for reading and matching; no credentials are ever part of one.
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
    if "text" in data:
        return TextDelta(data["text"])
    if "tool_call" in data:
        return ToolCallChunk(ToolCall(**data["tool_call"]))
    if "tokens" in data:
        return TokenCount(*data["tokens"])
    return Finish(data["finish"])


def error_to_json(error: LLMError) -> dict[str, Any]:
    data: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, ProviderError):
        data.update(
            status=error.status, retryable=error.retryable, retry_after_s=error.retry_after_s
        )
    if isinstance(error, MalformedOutput):
        data["raw"] = error.raw
    return data


def error_from_json(data: dict[str, Any]) -> LLMError:
    if data["type"] == "StreamBroken":
        return StreamBroken(data["message"])
    if data["type"] == "MalformedOutput":
        return MalformedOutput(data["message"], data["raw"])
    return ProviderError(
        data["message"],
        status=data.get("status"),
        retryable=data.get("retryable", False),
        retry_after_s=data.get("retry_after_s"),
    )


@dataclass(frozen=True)
class RecordedCall:
    fingerprint: str
    chunks: tuple[ProviderChunk, ...]
    error: LLMError | None
    cancelled: bool


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
        lines.append({"transcript": VERSION, "provider": provider, "model": model})
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


def read_transcript(path: Path) -> tuple[dict[str, Any], list[RecordedCall]]:
    lines = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    if not lines or lines[0].get("transcript") != VERSION:
        raise ValueError(
            f"{path} is not a version-{VERSION} transcript (its first line must be the header)"
        )
    calls = [
        RecordedCall(
            d["fingerprint"],
            tuple(chunk_from_json(c) for c in d["chunks"]),
            error_from_json(d["error"]) if d["error"] else None,
            d["cancelled"],
        )
        for d in lines[1:]
    ]
    return lines[0], calls
