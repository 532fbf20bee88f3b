"""What only the Gemini provider does: credentials and base URL from the environment, API
versions, Google's RetryInfo, thought signatures, malformed function calls, redaction."""

from __future__ import annotations

import base64

import pytest

from maxkernel_tui.agents.llm.errors import ProviderConfigError, ProviderError
from maxkernel_tui.agents.llm.gemini import (
    GeminiProvider,
    _contents,
    gemini_credentials,
)
from maxkernel_tui.agents.llm.types import Message, ToolCall, ToolCallChunk
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.scripted import Answer, Fail
from tests.support.llm import GEMINI_KEY, Harness, ask, collect

_ENV = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


async def test_key_and_base_url_from_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    server = await FakeGemini(Answer(["from env"])).start()
    clean_env.setenv("GEMINI_API_KEY", GEMINI_KEY)
    clean_env.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
    provider = GeminiProvider("gemini-2.5-flash")
    try:
        harness = Harness(server, provider)
        assert (await harness.client().complete(ask())).text == "from env"
        seen = server.requests[0]
        assert seen.headers["x-goog-api-key"] == GEMINI_KEY
        assert seen.path.endswith("/models/gemini-2.5-flash:streamGenerateContent")
    finally:
        await provider.aclose()
        await server.stop()


async def test_api_version_goes_into_the_path(gemini: Harness) -> None:
    provider = GeminiProvider(
        "gemini-2.5-flash", base_url=gemini.server.url, api_version="v1beta", api_key=GEMINI_KEY
    )
    gemini.server.script.extend([Answer(["a"]), Answer(["b"])])
    try:
        await Harness(gemini.server, provider).client().complete(ask(stream=False))
        await Harness(gemini.server, provider).client().complete(ask())
    finally:
        await provider.aclose()
    assert [r.path for r in gemini.server.requests] == [
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    ]


async def test_vertex_ai_express_mode_reaches_the_server(gemini: Harness) -> None:
    provider = GeminiProvider(
        "gemini-2.5-flash", base_url=gemini.server.url, vertexai=True, api_key=GEMINI_KEY
    )
    gemini.server.script.append(Answer(["vertex"]))
    try:
        assert (await Harness(gemini.server, provider).client().complete(ask())).text == "vertex"
    finally:
        await provider.aclose()
    assert (
        "/publishers/google/models/gemini-2.5-flash:streamGenerateContent"
        in gemini.server.requests[0].path
    )


def test_credentials_are_described_without_secrets() -> None:
    assert (
        gemini_credentials({"GOOGLE_API_KEY": "secret-value-123"})
        == "Gemini API key from GOOGLE_API_KEY"
    )
    vertex = gemini_credentials(
        {
            "GOOGLE_GENAI_USE_VERTEXAI": "true",
            "GOOGLE_CLOUD_PROJECT": "p",
            "GOOGLE_CLOUD_LOCATION": "us-central1",
        }
    )
    assert vertex is not None and "project p" in vertex and "us-central1" in vertex
    assert gemini_credentials({"GOOGLE_GENAI_USE_VERTEXAI": "true"}) is None
    assert gemini_credentials({}) is None


async def test_missing_credentials_fail_clearly(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProviderConfigError, match="GEMINI_API_KEY"):
        await collect(GeminiProvider("gemini-2.5-flash").stream(ask(model="gemini-2.5-flash")))


async def test_retry_info_in_the_error_body_is_honoured(gemini: Harness) -> None:
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}
    gemini.server.script.extend([Fail(429, "quota", details=[retry_info]), Answer(["ok"])])
    assert (await gemini.client().complete(ask())).text == "ok"
    assert gemini.sleep.waits == [3.0]


async def test_malformed_function_call_is_reasked(gemini: Harness) -> None:
    gemini.server.script.extend([Answer([], finish="MALFORMED_FUNCTION_CALL"), Answer(["fine"])])
    response = await gemini.client().complete(ask())
    assert response.text == "fine" and response.attempts == 2
    assert "malformed function call" in str(gemini.server.requests[1].body)


async def test_key_is_redacted_from_errors(gemini: Harness) -> None:
    gemini.server.script.append(Fail(400, f"API key {GEMINI_KEY} not valid"))
    with pytest.raises(ProviderError) as caught:
        await gemini.client().complete(ask())
    assert GEMINI_KEY not in str(caught.value) and "***" in str(caught.value)
    assert GEMINI_KEY not in repr(gemini.events) and GEMINI_KEY not in repr(gemini.provider)


async def test_calls_without_ids_get_local_ids_that_are_not_sent_back(gemini: Harness) -> None:
    gemini.server.script.append(Answer([], tool_calls=[("f", {}), ("g", {"x": 1})]))
    chunks = await collect(gemini.client().stream(ask()))
    ids = [c.call.id for c in chunks if isinstance(c, ToolCallChunk)]
    assert len(set(ids)) == 2
    turn = _contents([Message("tool", "r", tool_call_id=ids[0], name="f")])[0]
    assert turn.parts[0].function_response.id is None


def test_thought_signature_is_echoed_with_the_call() -> None:
    signature = base64.b64encode(b"opaque").decode()
    call = ToolCall("id-1", "f", {"a": 1}, signature)
    content = _contents(
        [
            Message("user", "hi"),
            Message("assistant", "calling", tool_calls=(call,)),
            Message("tool", "r1", tool_call_id="id-1", name="f"),
            Message("tool", "r2", tool_call_id="id-2", name="f"),
        ]
    )
    assert [c.role for c in content] == ["user", "model", "user"]
    assert content[1].parts[1].thought_signature == b"opaque"
    assert len(content[2].parts) == 2  # parallel results share one turn
