"""Build an LLM provider from a small settings mapping (config file, then environment, then flags).

    {"name": "gemini", "model": "gemini-3.5-flash"}       key or Vertex AI from the environment
    {"name": "gemini", "base_url": "http://127.0.0.1:9000", "api_version": "v1beta"}
    {"name": "openai", "model": "qwen3-coder", "base_url": "http://127.0.0.1:8000/v1",
     "api_key_env": "VLLM_API_KEY"}                       key, if any, named, never written
    {"name": "replay", "transcript": "session.jsonl"}
    any of them + {"record": "session.jsonl"}             also record every call there

This module knows the network providers only; the composition root (`agents.providers`) adds the
built-in offline agent, so that this package never imports `agents.builtin`. Settings hold the
names of environment variables, never keys. Provider modules are imported only when built, so
that listing or validating settings stays cheap. No jax.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.llm.errors import ProviderConfigError
from maxkernel_tui.agents.llm.provider import Provider

DEFAULT_GEMINI_MODEL = "gemini-3.5-flash"

Factory = Callable[[Mapping[str, Any], Mapping[str, str]], Provider]


@dataclass(frozen=True)
class ProviderKind:
    """How to build one kind of provider, and the settings it takes (besides name and record)."""

    build: Factory
    keys: frozenset[str]


def _key_from(settings: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    variable = settings.get("api_key_env")
    if variable is None:
        return None
    key = env.get(variable)
    if not key:
        raise ProviderConfigError(
            f"provider {settings.get('name')}: api_key_env names {variable}, which is not set"
        )
    return key


def _gemini(settings: Mapping[str, Any], env: Mapping[str, str]) -> Provider:
    from maxkernel_tui.agents.llm.gemini import GeminiProvider

    return GeminiProvider(
        settings.get("model", DEFAULT_GEMINI_MODEL),
        base_url=settings.get("base_url"),
        api_version=settings.get("api_version"),
        api_key=_key_from(settings, env),
        vertexai=settings.get("vertexai"),
        project=settings.get("project"),
        location=settings.get("location"),
    )


def _openai(settings: Mapping[str, Any], env: Mapping[str, str]) -> Provider:
    from maxkernel_tui.agents.llm.openai_compat import OpenAICompatProvider

    model, base_url = settings.get("model"), settings.get("base_url")
    for required, value in (("model", model), ("base_url", base_url)):
        if not value:
            raise ProviderConfigError(
                f"provider openai needs {required!r} (e.g. base_url "
                f"'http://127.0.0.1:8000/v1' and the model the server serves)"
            )
    return OpenAICompatProvider(str(model), str(base_url), api_key=_key_from(settings, env))


def _replay(settings: Mapping[str, Any], env: Mapping[str, str]) -> Provider:
    from maxkernel_tui.agents.llm.replay import ReplayProvider

    transcript = settings.get("transcript")
    if not transcript:
        raise ProviderConfigError(
            "provider replay needs 'transcript': the path of a recorded session"
        )
    path = Path(transcript)
    if not path.is_file():
        raise ProviderConfigError(f"provider replay: transcript {path} does not exist")
    return ReplayProvider(path, strict=settings.get("strict", True))


LLM_PROVIDERS: Mapping[str, ProviderKind] = {
    "gemini": ProviderKind(
        _gemini,
        frozenset(
            {"model", "base_url", "api_version", "api_key_env", "vertexai", "project", "location"}
        ),
    ),
    "openai": ProviderKind(_openai, frozenset({"model", "base_url", "api_key_env"})),
    "replay": ProviderKind(_replay, frozenset({"transcript", "strict"})),
}


def build_provider(
    settings: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    kinds: Mapping[str, ProviderKind] = LLM_PROVIDERS,
) -> Provider:
    """The provider `settings` describe, from `kinds` (the network providers by default)."""
    env = os.environ if env is None else env
    name = settings.get("name")
    kind = kinds.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ProviderConfigError(f"unknown provider {name!r}; known: {', '.join(sorted(kinds))}")
    unknown = set(settings) - kind.keys - {"name", "record"}
    if unknown:
        raise ProviderConfigError(
            f"provider {name}: unknown setting(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(kind.keys | {'record'}))}"
        )
    provider = kind.build(settings, env)
    record = settings.get("record")
    if record:
        from maxkernel_tui.agents.llm.replay import Recorder

        provider = Recorder(provider, Path(record))
    return provider
