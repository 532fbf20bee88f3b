"""The small rules: Retry-After, backoff, long waits, schema validation, settings."""

from __future__ import annotations

import random
from email.utils import formatdate
from pathlib import Path

import pytest

from maxkernel_tui.agents.llm import registry as llm_registry
from maxkernel_tui.agents.llm.errors import ProviderConfigError, RetriesExhausted
from maxkernel_tui.agents.llm.gemini import GeminiProvider
from maxkernel_tui.agents.llm.openai_compat import OpenAICompatProvider
from maxkernel_tui.agents.llm.replay import Recorder, ReplayProvider
from maxkernel_tui.agents.llm.retry import (
    RetryPolicy,
    parse_retry_after,
    retry_after_from,
)
from maxkernel_tui.agents.llm.structured import json_parser, parse_json
from maxkernel_tui.agents.providers import PROVIDERS, build_provider
from tests.fakes.scripted import Answer, Fail
from tests.support.llm import Harness, ask


def test_retry_after_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("5", lambda: now) == 5.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), lambda: now) == 30.0
    assert parse_retry_after(formatdate(now - 30, usegmt=True), lambda: now) == 0.0
    assert parse_retry_after("soon", lambda: now) is None
    assert (
        retry_after_from(
            {}, {"error": {"details": [{"@type": "x/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}
        )
        == 1.5
    )


def test_backoff_grows_with_jitter_and_caps() -> None:
    policy, rng = RetryPolicy(base_delay_s=1, max_delay_s=5, jitter=0.5), random.Random(1)
    delays = [policy.delay_s(n, None, rng) for n in range(1, 6)]
    assert all(d is not None for d in delays)
    for n, d in enumerate(delays, 1):
        assert min(5, 2 ** (n - 1)) * 0.5 <= d <= min(5, 2 ** (n - 1))
    assert policy.delay_s(1, 12.0, rng) == 12.0  # the server's wait, as asked
    assert policy.delay_s(1, 1e6, rng) is None


async def test_a_wait_longer_than_allowed_ends_the_call(backend: Harness) -> None:
    backend.server.script.append(Fail(429, "come back tomorrow", retry_after="86400"))
    with pytest.raises(
        RetriesExhausted, match="asked to wait 86400 s, more than the 120 s allowed"
    ):
        await backend.client().complete(ask())
    assert backend.sleep.waits == []


def test_schema_validation_names_the_place() -> None:
    schema = {
        "type": "object",
        "required": ["steps"],
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "tile": {"type": "integer", "minimum": 8},
                        "kind": {"enum": ["vmem", "smem"]},
                    },
                },
            }
        },
    }
    parse = json_parser(schema)
    assert parse('```json\n{"steps": [{"tile": 128, "kind": "vmem"}]}\n```') == {
        "steps": [{"tile": 128, "kind": "vmem"}]
    }
    for text, error in [
        ('{"steps": []}', r"\$\.steps: needs at least 1"),
        ('{"steps": [{"tile": 4}]}', r"\$\.steps\[0\]\.tile: 4 is below the minimum 8"),
        ('{"steps": [{"kind": "hbm"}]}', r"\$\.steps\[0\]\.kind: 'hbm' is not one of"),
        ('{"steps": [{"tile": true}]}', r"expected integer, got boolean"),
        ("{}", "missing required 'steps'"),
        ("[1]", r"\$: expected object, got array"),
    ]:
        with pytest.raises(ValueError, match=error):
            parse(text)
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_json("{'single': 'quotes'}")


def test_settings_build_providers(tmp_path: Path) -> None:
    gemini = build_provider({"name": "gemini", "base_url": "http://127.0.0.1:1"})
    assert isinstance(gemini, GeminiProvider) and gemini.model == "gemini-3.5-flash"
    local = build_provider(
        {
            "name": "openai",
            "model": "qwen",
            "base_url": "http://127.0.0.1:1/v1",
            "api_key_env": "MY_KEY",
        },
        env={"MY_KEY": "k" * 20},
    )
    assert isinstance(local, OpenAICompatProvider) and "k" * 20 not in repr(local)
    recorded = build_provider(
        {
            "name": "openai",
            "model": "qwen",
            "base_url": "http://x/v1",
            "record": str(tmp_path / "t.jsonl"),
        }
    )
    assert isinstance(recorded, Recorder) and recorded.name == "openai"


async def test_settings_build_a_replay(openai: Harness, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    openai.server.script.append(Answer(["recorded"]))
    recorder = build_provider(
        {
            "name": "openai",
            "model": "local-coder",
            "base_url": f"{openai.server.url}/v1",
            "record": str(path),
        }
    )
    await Harness(openai.server, recorder).client().complete(ask())
    await recorder.aclose()
    replay = build_provider({"name": "replay", "transcript": str(path)})
    assert isinstance(replay, ReplayProvider) and (replay.name, replay.model) == (
        "openai",
        "local-coder",
    )
    assert (await Harness(openai.server, replay).client().complete(ask())).text == "recorded"


def test_the_llm_registry_knows_the_network_providers_and_the_root_adds_builtin() -> None:
    with pytest.raises(ProviderConfigError, match=r"known: gemini, openai, replay$"):
        llm_registry.build_provider({"name": "builtin"}, env={})
    assert set(PROVIDERS) == {*llm_registry.LLM_PROVIDERS, "builtin"}
    assert build_provider({"name": "builtin", "target": "v6e"}).name == "builtin"


@pytest.mark.parametrize(
    "settings, error",
    [
        ({"name": "builtin", "target": "v9"}, "unknown TPU target 'v9'"),
        ({"name": "claude"}, "unknown provider 'claude'; known: builtin, gemini, openai, replay"),
        ({"name": "gemini", "base_ulr": "x"}, "unknown setting.*base_ulr"),
        ({"name": "openai", "model": "m"}, "needs 'base_url'"),
        (
            {"name": "openai", "model": "m", "base_url": "u", "api_key_env": "UNSET_VAR"},
            "UNSET_VAR, which is not set",
        ),
        ({"name": "replay", "transcript": "/nonexistent.jsonl"}, "does not exist"),
    ],
)
def test_bad_settings_say_what_is_wrong(settings: dict[str, str], error: str) -> None:
    with pytest.raises(ProviderConfigError, match=error):
        build_provider(settings, env={})
