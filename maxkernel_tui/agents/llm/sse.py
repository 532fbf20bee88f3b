"""Server-sent events from an aiohttp response body: the `data` of each complete event.

Per the SSE specification an event is complete only at its terminating blank line; a body that
ends inside an event drops that event, so a cut connection never yields a truncated payload.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import aiohttp


async def _lines(content: aiohttp.StreamReader) -> AsyncGenerator[str, None]:
    # Split ourselves: StreamReader's own line iterator refuses lines past 128 KiB, and one
    # event of a long answer can be longer.
    buffer = b""
    async for data in content.iter_any():
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode("utf-8")


async def sse_data(content: aiohttp.StreamReader) -> AsyncGenerator[str, None]:
    data: list[str] = []
    async for line in _lines(content):
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value.removeprefix(" "))
        # comments (":"), "event:", "id:" and "retry:" lines carry nothing we use
