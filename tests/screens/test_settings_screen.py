"""The settings screen writes the TOML config file through config.save_settings; invalid fields
are marked and nothing is written. The command palette reaches it."""

from __future__ import annotations

import tomllib

import pytest
from textual.widgets import Input, Select, Static

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import ConfigError, load_settings, save_settings
from maxkernel_tui.screens.settings import SettingsScreen
from tests.support.screens import palette_offers
from tests.support.waiting import until


def make_app(tmp_path, env=None) -> MaxKernelApp:
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "config.toml"),
            **(env or {}),
        }
    )
    return MaxKernelApp(cache=tmp_path / "cache", settings=settings)


async def test_save_writes_only_changed_fields_and_applies_them(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(
        '# my settings\nprovider = "gemini"\n\n'
        '[prices."gemini-2.5-pro"]\ninput = 1.25\noutput = 10\n'
    )
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("c")
        assert isinstance(app.screen, SettingsScreen)
        screen = app.screen
        screen.query_one("#model", Input).value = "gemini-2.5-flash"
        screen.query_one("#tpu_target", Select).value = "v6e"
        screen.query_one("#budget_dollars", Input).value = "2.50"
        screen.query_one("#theme", Select).value = "maxkernel-light"
        await pilot.press("ctrl+s")
        assert not isinstance(app.screen, SettingsScreen)
        assert app.theme == "maxkernel-light" and app.settings.tpu_target == "v6e"
    text = config.read_text()
    assert text.startswith("# my settings\n")  # the user's lines stay
    assert tomllib.loads(text) == {
        "provider": "gemini",
        "model": "gemini-2.5-flash",
        "tpu_target": "v6e",
        "budget_dollars": 2.5,
        "theme": "maxkernel-light",
        "prices": {"gemini-2.5-pro": {"input": 1.25, "output": 10}},
    }


async def test_invalid_fields_are_marked_and_nothing_is_saved(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("c")
        screen = app.screen
        screen.query_one("#budget_dollars", Input).value = "five"
        screen.query_one("#budget_tokens", Input).value = "-3"
        screen.query_one("#model", Input).value = "gemini-2.5-pro"
        await pilot.press("ctrl+s")
        assert app.screen is screen
        assert (
            str(screen.query_one("#budget_dollars-error", Static).content) == "✗ expected a number"
        )
        assert (
            str(screen.query_one("#budget_tokens-error", Static).content)
            == "✗ expected a whole number"
        )
        assert str(screen.query_one("#model-error", Static).content) == ""
    assert not (tmp_path / "config.toml").exists()


async def test_an_environment_value_is_not_copied_into_the_file(tmp_path):
    app = make_app(tmp_path, env={"MAXKERNEL_TUI_MODEL": "from-env"})
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("c")
        notes = [str(note.content) for note in app.screen.query(".source").results(Static)]
        assert "from MAXKERNEL_TUI_MODEL: it wins over the file" in notes
        app.screen.query_one("#provider", Select).value = "openai"
        await pilot.press("ctrl+s")
        assert app.settings.model == "from-env" and app.settings.provider == "openai"
    assert tomllib.loads((tmp_path / "config.toml").read_text()) == {"provider": "openai"}


async def test_escape_cancels_and_restores_the_previewed_theme(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("c")
        app.screen.query_one("#theme", Select).value = "textual-light"
        await pilot.pause()
        assert app.theme == "textual-light"
        await pilot.press("escape")
        assert app.theme == "maxkernel-ansi"
    assert not (tmp_path / "config.toml").exists()


async def test_command_palette_opens_settings(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+p", *"settings")
        await until(pilot, lambda: palette_offers(app, "settings"))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)


def test_save_settings_refuses_invalid_values_and_files_it_cannot_read(tmp_path):
    config = tmp_path / "config.toml"
    with pytest.raises(ConfigError, match="provider: expected one of builtin"):
        save_settings({"provider": "claude"}, config)
    assert not config.exists()
    config.write_text("provider = [broken\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        save_settings({"model": "m"}, config)
    assert config.read_text() == "provider = [broken\n"
    save_settings({"model": "m", "budget_tokens": None}, tmp_path / "new" / "config.toml")
    assert (tmp_path / "new" / "config.toml").read_text() == 'model = "m"\n'
