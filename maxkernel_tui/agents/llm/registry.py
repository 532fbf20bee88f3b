"""Build a provider from a small settings mapping (config file, then environment, then flags).

    {"name": "gemini", "model": "gemini-3.5-flash"}              key or Vertex AI from the environment
    {"name": "gemini", "base_url": "http://127.0.0.1:9000", "api_version": "v1beta"}
    {"name": "openai", "model": "qwen3-coder", "base_url": "http://127.0.0.1:8000/v1",
     "api_key_env": "VLLM_API_KEY"}                              key, if any, named, never written
    {"name": "replay", "transcript": "session.jsonl"}
    any of them + {"record": "session.jsonl"}                    also record every call there
    {"name": "builtin", "target": "v5e"}                         the built-in offline agent (no key, no network)

Settings hold the names of environment variables, never keys. Provider modules are imported
only when built, so that listing or validating settings stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.llm.errors import ProviderConfigError
from maxkernel_tui.agents.llm.provider import Provider

DEFAULT_GEMINI_MODEL = "gemini-3.5-flash"

Factory = Callable[[Mapping[str, Any], Mapping[str, str]], Provider]


def _key_from(settings: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    variable = settings.get("api_key_env")
    if variable is None:
        return None
    if not env.get(variable):
        raise ProviderConfigError(
            f"provider {settings['name']}: api_key_env names {variable}, which is not set"
        )
    return env[variable]


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

    for required in ("model", "base_url"):
        if not settings.get(required):
            raise ProviderConfigError(
                f"provider openai needs {required!r} (e.g. base_url "
                f"'http://127.0.0.1:8000/v1' and the model the server serves)"
            )
    return OpenAICompatProvider(
        settings["model"], settings["base_url"], api_key=_key_from(settings, env)
    )


def _replay(settings: Mapping[str, Any], env: Mapping[str, str]) -> Provider:
    from maxkernel_tui.agents.llm.replay import ReplayProvider

    if not settings.get("transcript"):
        raise ProviderConfigError(
            "provider replay needs 'transcript': the path of a recorded session"
        )
    path = Path(settings["transcript"])
    if not path.is_file():
        raise ProviderConfigError(f"provider replay: transcript {path} does not exist")
    return ReplayProvider(path, strict=settings.get("strict", True))


def _builtin(settings: Mapping[str, Any], env: Mapping[str, str]) -> Provider:
    from maxkernel_tui.agents.builtin.provider import BuiltinProvider
    from maxkernel_tui.kernels.targets import DEFAULT_TARGET, TARGETS

    target = settings.get("target", DEFAULT_TARGET)
    if target not in TARGETS:
        raise ProviderConfigError(
            f"provider builtin: unknown TPU target {target!r}; known: {', '.join(TARGETS)}"
        )
    return BuiltinProvider(target=target)


_FACTORIES: dict[str, Factory] = {
    "gemini": _gemini,
    "openai": _openai,
    "replay": _replay,
    "builtin": _builtin,
}
_KEYS: dict[str, set[str]] = {
    "gemini": {
        "model",
        "base_url",
        "api_version",
        "api_key_env",
        "vertexai",
        "project",
        "location",
    },
    "openai": {"model", "base_url", "api_key_env"},
    "replay": {"transcript", "strict"},
    "builtin": {
        "target"
    },  # the TPU generation its plans and estimates are for, when a step names none
}


def register(name: str, factory: Factory, keys: set[str]) -> None:
    """Add a provider (the offline agent registers itself here) with the settings it takes."""
    _FACTORIES[name] = factory
    _KEYS[name] = set(keys)


def build_provider(settings: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Provider:
    env = os.environ if env is None else env
    name = settings.get("name")
    if name not in _FACTORIES:
        raise ProviderConfigError(
            f"unknown provider {name!r}; known: {', '.join(sorted(_FACTORIES))}"
        )
    unknown = set(settings) - _KEYS[name] - {"name", "record"}
    if unknown:
        raise ProviderConfigError(
            f"provider {name}: unknown setting(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_KEYS[name] | {'record'}))}"
        )
    provider = _FACTORIES[name](settings, env)
    if settings.get("record"):
        from maxkernel_tui.agents.llm.replay import Recorder

        provider = Recorder(provider, Path(settings["record"]))
    return provider
