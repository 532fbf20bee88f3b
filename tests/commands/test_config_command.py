"""`maxkernel-tui config`: every setting, its value and its source; keys as set / not set."""

import json
import re


def test_sources_default_file_env_flag(run_cli, tmp_path):
    (tmp_path / "config.toml").write_text(
        'model = "gemini-2.5-pro"\nbudget_dollars = 5\nprovider = "openai"\n'
    )
    done = run_cli(
        "config",
        "--json",
        "--tpu-target",
        "v6e",
        env={"MAXKERNEL_TUI_PROVIDER": "gemini", "GEMINI_API_KEY": "AIza-very-secret-value-1234"},
    )
    shown = json.loads(done.stdout)
    settings = shown["settings"]
    assert settings["provider"] == {
        "value": "gemini",
        "source": "env",
        "where": "MAXKERNEL_TUI_PROVIDER",
        "env": "MAXKERNEL_TUI_PROVIDER",
        "flag": "--provider",
    }
    assert (settings["model"]["value"], settings["model"]["source"]) == ("gemini-2.5-pro", "file")
    assert settings["model"]["where"] == str(tmp_path / "config.toml")
    assert (settings["budget_dollars"]["value"], settings["budget_dollars"]["source"]) == (
        5.0,
        "file",
    )
    assert (settings["tpu_target"]["value"], settings["tpu_target"]["source"]) == ("v6e", "flag")
    assert (settings["budget_tokens"]["value"], settings["budget_tokens"]["source"]) == (
        None,
        "default",
    )
    assert settings["data_dir"] == {
        "value": str(tmp_path / "data"),
        "source": "env",
        "where": "MAXKERNEL_TUI_DATA_DIR",
        "env": "MAXKERNEL_TUI_DATA_DIR",
        "flag": "--data-dir",
    }
    assert shown["secrets"] == {
        "GEMINI_API_KEY": "set",
        "GOOGLE_API_KEY": "not set",
        "OPENAI_API_KEY": "not set",
    }
    assert shown["config_file_exists"] is True and shown["store"] == str(
        tmp_path / "data" / "sessions.db"
    )
    assert "very-secret" not in done.stdout + done.stderr


def test_text_table(run_cli, tmp_path):
    (tmp_path / "config.toml").write_text(
        'api_key = "sk-abcdefghijklmnopqrstuvwxyz"\nbudget_tokens = 100000\n'
    )
    out = run_cli("config", env={"MAXKERNEL_TUI_BASE_URL": "http://me:pw@127.0.0.1:8000/v1"}).stdout
    assert f"config file: {tmp_path / 'config.toml'} (read)" in out
    assert re.search(r"^provider +builtin +default$", out, re.MULTILINE)
    file = re.escape(str(tmp_path / "config.toml"))
    assert re.search(rf"^budget_tokens +100000 +file \({file}\)$", out, re.MULTILINE)
    assert re.search(
        r"^base_url +http://me:\*\*\*@127\.0\.0\.1:8000/v1 +env \(MAXKERNEL_TUI_BASE_URL\)$",
        out,
        re.MULTILINE,
    )
    assert "GEMINI_API_KEY  not set" in out
    assert "'api_key' ignored: API keys are read only from the environment" in out
    assert "sk-abc" not in out and "pw@" not in out


def test_a_bad_value_is_a_usage_error(run_cli):
    done = run_cli("config", env={"MAXKERNEL_TUI_BUDGET_TOKENS": "lots"}, expect=2)
    assert (
        "error: budget_tokens from env (MAXKERNEL_TUI_BUDGET_TOKENS): expected a whole number"
        in done.stderr
    )
