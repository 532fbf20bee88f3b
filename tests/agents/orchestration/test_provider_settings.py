"""The provider a session builds takes only the settings its kind knows: a model chosen for other
providers (in the config file, or stored by a built-in session being resumed) is not the
built-in agent's, and must not stop it."""

from maxkernel_tui.agents.orchestration.session import provider_settings
from maxkernel_tui.agents.providers import build_provider
from maxkernel_tui.config import Settings


def test_the_builtin_agent_is_built_whatever_model_is_configured():
    settings = Settings(provider="builtin", model="builtin", base_url="http://127.0.0.1:9/v1")
    assert provider_settings(settings) == {"name": "builtin"}
    assert build_provider(provider_settings(settings)).name == "builtin"


def test_a_network_provider_keeps_its_model_and_address():
    settings = Settings(provider="openai", model="local-coder", base_url="http://127.0.0.1:9/v1")
    assert provider_settings(settings) == {
        "name": "openai",
        "model": "local-coder",
        "base_url": "http://127.0.0.1:9/v1",
    }
