"""Record any provider's calls to a transcript, and play a transcript back as a provider.

A replayed session needs no network and no key: each call is answered from the transcript,
chunks and errors as recorded, so the client takes the same retries and re-asks and the meter
shows the same figures. Calls are matched by the request's fingerprint, in recorded order per
fingerprint, so sub-agents whose calls interleave differently still replay; `strict=False` takes
calls in file order whatever they ask (for transcripts edited by hand).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path

from maxkernel_tui.agents.llm.errors import (
    LLMError,
    MalformedOutput,
    ProviderError,
    ReplayMismatch,
)
from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.llm.transcript import (
    RecordedCall,
    append_call,
    fingerprint,
    read_transcript,
)
from maxkernel_tui.agents.llm.types import ProviderChunk, Request


class Recorder:
    """A provider that passes every call through to `inner` and appends it to `path`."""

    def __init__(self, inner: Provider, path: Path) -> None:
        self.inner, self.path = inner, Path(path)
        self.name, self.model = inner.name, inner.model

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def stream(self, request: Request) -> AsyncGenerator[ProviderChunk, None]:
        chunks: list[ProviderChunk] = []
        error: LLMError | None = None
        cancelled = False
        try:
            async with aclosing(self.inner.stream(request)) as inner:
                async for chunk in inner:
                    chunks.append(chunk)
                    yield chunk
        except (ProviderError, MalformedOutput) as e:
            error = e
            raise
        except BaseException:
            cancelled = True
            raise
        finally:
            append_call(self.path, self.name, self.model, request, chunks, error, cancelled)


class ReplayProvider:
    def __init__(self, path: Path, *, strict: bool = True) -> None:
        self.path = Path(path)
        header, self._calls = read_transcript(self.path)
        self.name, self.model = header.provider, header.model
        self._used = [False] * len(self._calls)
        self._strict = strict

    async def aclose(self) -> None:
        return None

    def _take(self, request: Request) -> RecordedCall:
        wanted = fingerprint(request)
        for i, call in enumerate(self._calls):
            if not self._used[i] and (call.fingerprint == wanted or not self._strict):
                self._used[i] = True
                return call
        left = self._used.count(False)
        raise ReplayMismatch(
            f"{self.path}: no recorded call left for this request (fingerprint {wanted}; "
            f"{left} recorded call(s) unused). The session asked for something it did not "
            f"ask for when recorded."
        )

    async def stream(self, request: Request) -> AsyncGenerator[ProviderChunk, None]:
        call = self._take(request)
        for chunk in call.chunks:
            await asyncio.sleep(0)  # a point where the consumer can cancel, as on the wire
            yield chunk
        if call.error is not None:
            raise call.error
        if (
            call.cancelled
        ):  # timed out or cancelled when recorded: the client retried, or stopped there
            raise ProviderError(
                "this call was cut short (timeout or cancel) when it was recorded", retryable=True
            )
