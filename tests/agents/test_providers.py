"""The same behaviours through both real providers: the real google-genai client against the fake
Gemini server, and our aiohttp client against the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from maxkernel_tui.agents.llm.errors import (
    MalformedOutput,
    ProviderError,
    RetriesExhausted,
    StreamBroken,
)
from maxkernel_tui.agents.llm.events import AttemptEnded, ReaskScheduled, RetryScheduled
from maxkernel_tui.agents.llm.types import (
    Discarded,
    Done,
    Message,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
)
from tests.fakes.scripted import Answer, Cut, Fail, Hang
from tests.support.llm import Harness, ask, collect

PLAN_SCHEMA = {
    "type": "object",
    "properties": {"block": {"type": "integer"}},
    "required": ["block"],
    "additionalProperties": False,
}


async def test_plain_answer(backend: Harness) -> None:
    backend.server.script.append(Answer(["Hello", " there"], usage=(12, 3)))
    response = await backend.client().complete(ask(stream=False))
    assert response.text == "Hello there"
    assert response.finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 3)
    assert response.usage.provider == backend.provider.name and not response.usage.estimated
    assert response.usage.cost_usd is not None or backend.provider.name == "openai"
    assert len(backend.server.requests) == 1


async def test_streamed_answer(backend: Harness) -> None:
    backend.server.script.append(Answer(["Hel", "lo", "!"]))
    chunks = await collect(backend.client().stream(ask()))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["Hel", "lo", "!"]
    assert all(c.attempt == 1 for c in chunks if isinstance(c, (TextDelta, UsageChunk)))
    assert isinstance(chunks[-2], UsageChunk) and isinstance(chunks[-1], Done)
    assert chunks[-1].response.text == "Hello!"
    assert chunks[-1].response.usage.latency_s >= 0
    assert [type(e) for e in backend.events] == [AttemptEnded]


async def test_function_call(backend: Harness) -> None:
    backend.server.script.append(
        Answer([], tool_calls=[("run_eval", {"kernel": "k.py", "seeds": 2})])
    )
    tool = ToolSpec(
        "run_eval",
        "Evaluate a kernel.",
        {
            "type": "object",
            "properties": {"kernel": {"type": "string"}, "seeds": {"type": "integer"}},
            "required": ["kernel"],
        },
    )
    chunks = await collect(backend.client().stream(ask(tools=(tool,))))
    calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.name, c.arguments) for c in calls] == [("run_eval", {"kernel": "k.py", "seeds": 2})]
    response = chunks[-1].response
    assert response.finish_reason == "tool_calls" and response.tool_calls == tuple(calls)
    sent = str(backend.server.requests[0].body)
    assert "run_eval" in sent and "seeds" in sent


async def test_tool_result_turn_is_sent_back(backend: Harness) -> None:
    backend.server.script.append(Answer(["Done."]))
    call = ToolCall("call_0", "run_eval", {"kernel": "k.py"})
    request = ask(tools=(ToolSpec("run_eval", "Evaluate."),))
    request = replace(
        request,
        messages=request.messages
        + (
            Message("assistant", tool_calls=(call,)),
            Message("tool", "accepted", tool_call_id="call_0", name="run_eval"),
        ),
    )
    assert (await backend.client().complete(request)).text == "Done."
    assert "accepted" in str(backend.server.requests[0].body)


async def test_429_then_success_honours_retry_after(backend: Harness) -> None:
    backend.server.script.extend([Fail(429, "slow down", retry_after="7"), Answer(["ok"])])
    chunks = await collect(backend.client().stream(ask()))
    assert backend.sleep.waits == [7.0]
    assert len(backend.server.requests) == 2
    discarded = [c for c in chunks if isinstance(c, Discarded)]
    assert len(discarded) == 1 and discarded[0].attempt == 1 and "429" in discarded[0].reason
    assert (discarded[0].then, discarded[0].delay_s) == ("retry", 7.0)  # shown before the wait
    response = chunks[-1].response
    assert response.text == "ok" and response.attempts == 2
    retry = next(e for e in backend.events if isinstance(e, RetryScheduled))
    assert (retry.status, retry.delay_s, retry.server_asked, retry.failed_attempt) == (
        429,
        7.0,
        True,
        1,
    )
    assert [e.outcome for e in backend.events if isinstance(e, AttemptEnded)] == ["retry", "ok"]


async def test_500_retried_then_fails_clearly(backend: Harness) -> None:
    backend.server.script.extend([Fail(500, "boom")] * 3)
    chunks = []
    with pytest.raises(RetriesExhausted) as caught:
        async for chunk in backend.client(max_attempts=3).stream(ask()):
            chunks.append(chunk)
    assert [type(c) for c in chunks] == [UsageChunk, Discarded, UsageChunk, Discarded, UsageChunk]
    assert "gave up after 3 attempts" in str(caught.value) and "500" in str(caught.value)
    assert caught.value.status == 500
    assert len(backend.server.requests) == 3
    assert len(backend.sleep.waits) == 2
    # Backoff: 1 s then 2 s, each reduced by at most half (jitter).
    assert 0.5 <= backend.sleep.waits[0] <= 1.0 and 1.0 <= backend.sleep.waits[1] <= 2.0
    assert [e.outcome for e in backend.events if isinstance(e, AttemptEnded)] == [
        "retry",
        "retry",
        "failed",
    ]


async def test_client_error_is_not_retried(backend: Harness) -> None:
    backend.server.script.append(Fail(400, "bad request"))
    with pytest.raises(ProviderError) as caught:
        await backend.client().complete(ask())
    assert caught.value.status == 400 and not isinstance(caught.value, RetriesExhausted)
    assert len(backend.server.requests) == 1 and backend.sleep.waits == []


async def test_stream_cut_midway_is_discarded_and_retried(backend: Harness) -> None:
    backend.server.script.extend(
        [Cut(Answer(["Half of", " an answer"]), after=1), Answer(["Whole", " answer"])]
    )
    chunks = await collect(backend.client().stream(ask()))
    first = [c.text for c in chunks if isinstance(c, TextDelta) and c.attempt == 1]
    assert first == ["Half of"]
    discarded = next(c for c in chunks if isinstance(c, Discarded))
    assert discarded.attempt == 1 and "broke off" in discarded.reason
    assert chunks[-1].response.text == "Whole answer"  # nothing of attempt 1 in it
    assert chunks[-1].response.attempts == 2
    # The broken attempt was billed by estimate: its prompt was read.
    usages = [c.usage for c in chunks if isinstance(c, UsageChunk)]
    assert usages[0].estimated and usages[0].prompt_tokens > 0 and not usages[1].estimated


async def test_stream_cut_every_time_is_reported(backend: Harness) -> None:
    backend.server.script.extend([Cut(after=1)] * 2)
    with pytest.raises(RetriesExhausted) as caught:
        await backend.client(max_attempts=2).complete(ask())
    assert isinstance(caught.value.last, StreamBroken)


async def test_stream_without_finish_is_broken(backend: Harness) -> None:
    backend.server.script.extend([Answer(["no end"], finish=None), Answer(["end"])])
    response = await backend.client().complete(ask())
    assert response.text == "end" and response.attempts == 2


async def test_malformed_json_is_reasked_with_the_error(backend: Harness) -> None:
    backend.server.script.extend(
        [Answer(['{"block": 128,']), Answer(['{"block": "big"}']), Answer(['{"block": 256}'])]
    )
    chunks = await collect(
        backend.client().stream(ask("Pick a block size.", json_schema=PLAN_SCHEMA))
    )
    response = chunks[-1].response
    assert response.parsed == {"block": 256} and response.attempts == 3
    assert [c.attempt for c in chunks if isinstance(c, Discarded)] == [1, 2]
    assert [(c.then, c.delay_s) for c in chunks if isinstance(c, Discarded)] == [("reask", 0.0)] * 2
    second, third = (str(r.body) for r in backend.server.requests[1:])
    assert "not valid JSON" in second
    assert "$.block: expected integer, got string" in third
    assert [e.reask for e in backend.events if isinstance(e, ReaskScheduled)] == [1, 2]
    assert backend.sleep.waits == []
    schema_sent = str(backend.server.requests[0].body)
    assert "block" in schema_sent  # the schema went to the server


async def test_malformed_json_gives_up_after_bounded_reasks(backend: Harness) -> None:
    backend.server.script.extend([Answer(["nope"])] * 2)
    with pytest.raises(MalformedOutput, match="still malformed after 1 re-asks"):
        await backend.client(max_reasks=1).complete(ask(json_schema=PLAN_SCHEMA))
    assert len(backend.server.requests) == 2


async def test_cancel_closes_the_http_stream(backend: Harness) -> None:
    backend.server.script.append(Hang(Answer(["thinking..."]), after=1))
    first_chunk = asyncio.Event()

    async def consume() -> None:
        async for chunk in backend.client().stream(ask()):
            if isinstance(chunk, TextDelta):
                first_chunk.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_chunk.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(backend.server.disconnected.wait(), 10)
    assert [e.outcome for e in backend.events if isinstance(e, AttemptEnded)] == ["cancelled"]


async def test_timeout_per_attempt_is_retried(backend: Harness) -> None:
    backend.server.script.extend([Hang(after=1), Answer(["in time"])])
    response = await backend.client(timeout_s=1.0).complete(ask())
    assert response.text == "in time" and response.attempts == 2
    retry = next(e for e in backend.events if isinstance(e, RetryScheduled))
    assert "within 1 s" in retry.reason
    await asyncio.wait_for(backend.server.disconnected.wait(), 10)
