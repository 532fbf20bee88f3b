"""What only the OpenAI-compatible provider does: request shape, keys only when configured,
tool-call arguments assembled from pieces and re-asked when they are not JSON."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.llm.errors import ProviderError
from maxkernel_tui.agents.llm.openai_compat import OpenAICompatProvider
from maxkernel_tui.agents.llm.types import ToolSpec
from tests.fakes.scripted import Answer, Fail
from tests.support.llm import OPENAI_KEY, Harness, ask

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


async def test_request_body(openai: Harness) -> None:
    openai.server.script.append(Answer(['{"ok": true}']))
    request = ask(
        tools=(ToolSpec("f", "A tool."),), json_schema=SCHEMA, temperature=0.2, max_tokens=99
    )
    await openai.client().complete(request)
    body = openai.server.requests[0].body
    assert body["model"] == "local-coder" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."},
    ]
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "f",
            "description": "A tool.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert (body["temperature"], body["max_tokens"]) == (0.2, 99)
    assert openai.server.requests[0].headers["Authorization"] == f"Bearer {OPENAI_KEY}"


async def test_no_key_no_authorization_header(openai: Harness) -> None:
    provider = OpenAICompatProvider("local-coder", f"{openai.server.url}/v1/")
    openai.server.script.append(Answer(["hi"]))
    try:
        assert (await Harness(openai.server, provider).client().complete(ask())).text == "hi"
    finally:
        await provider.aclose()
    assert "Authorization" not in openai.server.requests[0].headers


async def test_unparsable_tool_arguments_come_back_as_a_call_marked_malformed(
    openai: Harness,
) -> None:
    """Not re-asked: the tool loop answers the call itself with the error (a re-ask could not
    name the call the model made)."""
    openai.server.script.append(
        Answer([], tool_calls=[("f", '{"a": '), ("g", "[1, 2]"), ("h", '{"b": 2}')])
    )
    response = await openai.client().complete(ask(tools=(ToolSpec("f", "A tool."),)))
    calls = response.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("f", {}), ("g", {}), ("h", {"b": 2})]
    assert calls[0].malformed is not None and "not valid JSON" in calls[0].malformed
    assert calls[1].malformed is not None and "not a JSON object" in calls[1].malformed
    assert calls[2].malformed is None
    assert len(openai.server.requests) == 1


async def test_key_is_redacted_from_errors(openai: Harness) -> None:
    openai.server.script.append(Fail(401, f"Incorrect API key provided: {OPENAI_KEY}"))
    with pytest.raises(ProviderError) as caught:
        await openai.client().complete(ask())
    assert caught.value.status == 401
    assert OPENAI_KEY not in str(caught.value) and "***" in str(caught.value)
    assert OPENAI_KEY not in repr(openai.provider)


async def test_unreachable_server_is_a_retryable_connection_error(openai: Harness) -> None:
    url = openai.server.url
    await openai.server.stop()
    provider = OpenAICompatProvider("local-coder", f"{url}/v1")
    try:
        with pytest.raises(ProviderError, match=r"gave up after 2 attempts.*cannot reach"):
            await Harness(openai.server, provider).client(max_attempts=2).complete(ask())
    finally:
        await provider.aclose()
