"""Settings: defaults < TOML file < MAXKERNEL_TUI_* variables < flags, each value with its
source."""

import argparse
from pathlib import Path

import pytest

from maxkernel_tui.config import (
    SPECS,
    ConfigError,
    Settings,
    add_settings_flags,
    cache_dir,
    config_path,
    load_settings,
    mask_url,
    secret_status,
    settings_from_args,
)


@pytest.fixture
def env(tmp_path):
    return {
        "MAXKERNEL_TUI_CONFIG": str(tmp_path / "config.toml"),
        "XDG_DATA_HOME": str(tmp_path / "share"),
    }


def write(env, text):
    Path(env["MAXKERNEL_TUI_CONFIG"]).write_text(text)


def test_defaults(env, tmp_path):
    settings = load_settings(env=env)
    assert (settings.provider, settings.model, settings.base_url) == ("builtin", None, None)
    assert (settings.budget_tokens, settings.budget_dollars, settings.tpu_target) == (
        None,
        None,
        "v5e",
    )
    assert settings.data_dir == tmp_path / "share" / "maxkernel-tui"
    assert settings.store_path == tmp_path / "share" / "maxkernel-tui" / "sessions.db"
    assert settings.source("provider").kind == "default" and settings.warnings == ()


def test_file_then_environment_then_flags(env):
    write(
        env,
        'provider = "gemini"\nmodel = "gemini-2.5-pro"\nbudget_tokens = 200_000\nbudget_dollars = '
        "5\n"
        'tpu_target = "v6e"\n[prices."gemini-2.5-pro"]\ninput = 1.25\noutput = 10\n',
    )
    env |= {
        "MAXKERNEL_TUI_MODEL": "gemini-2.5-flash",
        "MAXKERNEL_TUI_BUDGET_DOLLARS": "2.50",
        "MAXKERNEL_TUI_TPU_TARGET": "v4",
    }
    settings = load_settings({"tpu_target": "v5p", "model": None}, env=env)
    assert (
        settings.provider == "gemini"
        and str(settings.source("provider")) == f"file ({env['MAXKERNEL_TUI_CONFIG']})"
    )
    assert settings.budget_tokens == 200_000 and settings.source("budget_tokens").kind == "file"
    assert (
        settings.model == "gemini-2.5-flash"
        and settings.source("model").where == "MAXKERNEL_TUI_MODEL"
    )
    assert settings.budget_dollars == 2.5 and settings.source("budget_dollars").kind == "env"
    assert settings.tpu_target == "v5p" and str(settings.source("tpu_target")) == "flag (--tpu)"
    assert settings.prices == {"gemini-2.5-pro": {"input": 1.25, "output": 10.0}}


def test_flags_from_argparse(env, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CONFIG", env["MAXKERNEL_TUI_CONFIG"])
    parser = argparse.ArgumentParser()
    add_settings_flags(parser)
    args = parser.parse_args(
        [
            "--provider",
            "openai",
            "--base-url",
            "http://127.0.0.1:8000/v1/",
            "--budget-tokens",
            "1000",
        ]
    )
    settings = settings_from_args(args)
    assert (settings.provider, settings.base_url, settings.budget_tokens) == (
        "openai",
        "http://127.0.0.1:8000/v1",
        1000,
    )
    assert {settings.source(n).kind for n in ("provider", "base_url", "budget_tokens")} == {"flag"}
    assert "--prices" not in parser.format_help()  # file only


@pytest.mark.parametrize(
    "layer, name, raw, message",
    [
        ("file", "provider", '"claude"', "expected one of builtin, gemini, openai, replay"),
        ("file", "budget_tokens", "-5", "expected a whole number above 0"),
        ("file", "base_url", '"localhost:8000"', "expected an http:// or https:// URL"),
        ("env", "budget_dollars", "lots", "expected a number"),
        ("env", "budget_tokens", "1.5", "expected a whole number"),
    ],
)
def test_bad_values_name_their_source(env, layer, name, raw, message):
    if layer == "file":
        write(env, f"{name} = {raw}\n")
        where = f"{name} from file ({env['MAXKERNEL_TUI_CONFIG']})"
    else:
        env[f"MAXKERNEL_TUI_{name.upper()}"] = raw
        where = f"{name} from env (MAXKERNEL_TUI_{name.upper()})"
    with pytest.raises(ConfigError) as error:
        load_settings(env=env)
    assert str(error.value).startswith(where) and message in str(error.value)


def test_invalid_toml_names_the_file(env):
    write(env, "provider = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(env=env)


def test_api_keys_are_never_read_from_the_file(env):
    write(env, 'api_key = "AIzaSyA1234567890abcdefghijklmnopqrstuv"\ncolour = "blue"\n')
    settings = load_settings(env=env)
    assert "API keys are read only from the environment" in settings.warnings[0]
    assert "unknown setting 'colour'" in settings.warnings[1]
    assert "AIza" not in repr(settings)
    assert not any(f.name == "api_key" for f in Settings.__dataclass_fields__.values())


def test_secret_status_says_set_never_the_value():
    status = secret_status({"GEMINI_API_KEY": "AIza-secret-value", "OPENAI_API_KEY": ""})
    assert status == {
        "GEMINI_API_KEY": "set",
        "GOOGLE_API_KEY": "not set",
        "OPENAI_API_KEY": "not set",
    }
    assert mask_url("https://me:pa55@host:8000/v1") == "https://me:***@host:8000/v1"


def test_where_files_live(tmp_path, monkeypatch):
    assert (
        config_path({"XDG_CONFIG_HOME": str(tmp_path)})
        == tmp_path / "maxkernel-tui" / "config.toml"
    )
    assert config_path({}) == Path.home() / ".config" / "maxkernel-tui" / "config.toml"
    assert (
        load_settings(env={"MAXKERNEL_TUI_CONFIG": str(tmp_path / "c.toml")}).data_dir
        == Path.home() / ".local" / "share" / "maxkernel-tui"
    )
    monkeypatch.delenv("MAXKERNEL_TUI_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache" / "maxkernel-tui"
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


def test_data_dir_from_file_is_relative_to_it_and_env_wins(env, tmp_path):
    write(env, 'data_dir = "store"\n')
    assert load_settings(env=env).data_dir == tmp_path / "store"
    env["MAXKERNEL_TUI_DATA_DIR"] = str(tmp_path / "elsewhere")
    settings = load_settings(env=env)
    assert settings.data_dir == tmp_path / "elsewhere" and settings.source("data_dir").kind == "env"


def test_one_flag_per_setting_and_the_older_spellings_still_read(env, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CONFIG", env["MAXKERNEL_TUI_CONFIG"])
    flags = [spec.flag for spec in SPECS if spec.flag]
    assert len(flags) == len(set(flags)) and {"--tpu", "--budget-usd"} <= set(flags)
    parser = argparse.ArgumentParser()
    add_settings_flags(parser, scope="search")
    shown = parser.format_help()
    assert "--tpu-target" not in shown and "--budget-dollars" not in shown
    assert "hard cap on dollars per search" in shown
    settings = settings_from_args(
        parser.parse_args(["--tpu-target", "v6e", "--budget-dollars", "3"])
    )
    assert (settings.tpu_target, settings.budget_dollars) == ("v6e", 3.0)
    assert str(settings.source("budget_dollars")) == "flag (--budget-usd)"
