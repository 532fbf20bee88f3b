"""The composition root of providers: every kind a session can use, the network ones from
`agents.llm.registry` and the built-in offline agent from `agents.builtin`. Sessions build their
provider here; `agents.llm` itself never imports `agents.builtin`. No jax at import (the built-in
agent's jax side runs in its worker process).

    {"name": "builtin", "target": "v5e"}   the built-in offline agent (no key, no network)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from maxkernel_tui.agents.llm.errors import ProviderConfigError
from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.llm.registry import LLM_PROVIDERS, ProviderKind
from maxkernel_tui.agents.llm.registry import build_provider as build_from


def _builtin(settings: Mapping[str, Any], env: Mapping[str, str]) -> Provider:
    from maxkernel_tui.agents.builtin.provider import BuiltinProvider
    from maxkernel_tui.kernels.targets import DEFAULT_TARGET, TARGETS

    target = settings.get("target", DEFAULT_TARGET)
    if target not in TARGETS:
        raise ProviderConfigError(
            f"provider builtin: unknown TPU target {target!r}; known: {', '.join(TARGETS)}"
        )
    return BuiltinProvider(target=target)


# builtin's one setting: the TPU generation its plans and estimates are for, when a step names none
PROVIDERS: Mapping[str, ProviderKind] = {
    **LLM_PROVIDERS,
    "builtin": ProviderKind(_builtin, frozenset({"target"})),
}


def build_provider(settings: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Provider:
    """The provider `settings` describe: any kind in `PROVIDERS` (see `agents.llm.registry`)."""
    return build_from(settings, env, PROVIDERS)
