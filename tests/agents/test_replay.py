"""Record a session against a live (fake) server, stop the server, replay it: the same chunks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.errors import ReplayMismatch
from maxkernel_tui.agents.llm.replay import Recorder, ReplayProvider
from maxkernel_tui.agents.llm.types import ToolSpec, UsageChunk
from tests.fakes.scripted import Answer, Cut, Fail
from tests.support.llm import FakeSleep, Harness, ask, collect

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _without_latency(chunks: list[Any]) -> list[Any]:
    return [
        replace(c, usage=replace(c.usage, latency_s=0.0)) if isinstance(c, UsageChunk) else c
        for c in chunks
        if not hasattr(c, "response")
    ] + [
        replace(c.response, usage=replace(c.response.usage, latency_s=0.0))
        for c in chunks
        if hasattr(c, "response")
    ]


async def _session(client: LLMClient) -> list[list[Any]]:
    tool = ToolSpec("run_eval", "Evaluate.")
    return [
        await collect(client.stream(ask("first"))),
        await collect(client.stream(ask("second", tools=(tool,)))),
        await collect(client.stream(ask("third", json_schema=SCHEMA))),
    ]


async def test_replay_round_trip(backend: Harness, tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    backend.server.script.extend(
        [
            Fail(429, "later", retry_after="2"),
            Answer(["Hel", "lo"]),
            Cut(Answer(["cut"]), after=1),
            Answer([], tool_calls=[("run_eval", {"kernel": "k.py"})]),
            Answer(["not json"]),
            Answer(['{"n": 3}']),
        ]
    )
    recorded = await _session(LLMClient(Recorder(backend.provider, transcript), sleep=FakeSleep()))
    assert len(backend.server.requests) == 6
    await backend.server.stop()

    replay_sleep = FakeSleep()
    replayed = await _session(LLMClient(ReplayProvider(transcript), sleep=replay_sleep))
    assert [_without_latency(r) for r in replayed] == [_without_latency(r) for r in recorded]
    # The recorded 429 is replayed, Retry-After and all, and so is the cut stream's retry.
    assert len(replay_sleep.waits) == 2 and replay_sleep.waits[0] == 2.0
    header = json.loads(transcript.read_text().splitlines()[0])
    assert header == {
        "transcript": 1,
        "provider": backend.provider.name,
        "model": backend.provider.model,
    }
    assert "key" not in transcript.read_text().lower()


async def test_replay_refuses_a_different_request(backend: Harness, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    backend.server.script.append(Answer(["a"]))
    await LLMClient(Recorder(backend.provider, transcript)).complete(ask("recorded"))
    replay = LLMClient(ReplayProvider(transcript))
    with pytest.raises(ReplayMismatch, match="no recorded call left"):
        await replay.complete(ask("something else"))
    loose = LLMClient(ReplayProvider(transcript, strict=False))
    assert (await loose.complete(ask("something else"))).text == "a"


async def test_a_transcript_needs_its_header(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"fingerprint": "x"}\n')
    with pytest.raises(ValueError, match="not a version-1 transcript"):
        ReplayProvider(path)
