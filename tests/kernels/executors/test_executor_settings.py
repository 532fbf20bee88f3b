"""Choosing the executor: `[executor] ray` in the config file, `MAXKERNEL_TUI_RAY`, `--ray`;
a bad address is an error naming its source; the settings screen's save writes the table and
keeps the rest of the file; the local choice builds the local tools without importing Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from maxkernel_tui.agents.orchestration.tools import build_tools
from maxkernel_tui.config import ConfigError, load_settings, save_settings
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.service.setup import EvaluationSetup

TASK = Path(__file__).parents[2] / "data" / "ray_tasks" / "1r_Scaled_Add"


def test_the_ray_address_comes_from_the_executor_table_then_the_environment_then_the_flag(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('provider = "builtin"\n\n[executor]\nray = "10.0.0.2:6379"\n')
    env = {"MAXKERNEL_TUI_CONFIG": str(config)}
    assert load_settings(env=env).ray == "10.0.0.2:6379"
    assert load_settings(env=env).source("ray").kind == "file"
    env["MAXKERNEL_TUI_RAY"] = "local"
    assert load_settings(env=env).ray == "local"
    assert load_settings({"ray": "127.0.0.1:7000"}, env=env).ray == "127.0.0.1:7000"
    with pytest.raises(ConfigError, match="HOST:PORT"):
        load_settings({"ray": "nowhere"}, env=env)


def test_saving_the_ray_setting_writes_the_executor_table_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# mine\nprovider = "builtin"\n[prices."m"]\ninput = 1\noutput = 2\n')
    save_settings({"ray": "127.0.0.1:6379"}, config)
    text = config.read_text()
    assert text.startswith('# mine\nprovider = "builtin"\n[prices."m"]')
    assert text.endswith('[executor]\nray = "127.0.0.1:6379"\n')
    save_settings({"ray": None}, config)
    assert "ray =" not in config.read_text()
    assert load_settings(env={"MAXKERNEL_TUI_CONFIG": str(config)}).ray is None


def test_an_unknown_name_in_the_executor_table_is_a_warning(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[executor]\nnodes = 3\n")
    settings = load_settings(env={"MAXKERNEL_TUI_CONFIG": str(config)})
    assert settings.ray is None
    assert any("'nodes' in [executor]" in w for w in settings.warnings)


def test_the_local_choice_builds_the_local_tools_and_leaves_ray_unimported(
    tmp_path: Path,
) -> None:
    env = {"MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml")}
    setup = EvaluationSetup.of(load_settings({"tpu_target": "v5e"}, env=env))
    choice = setup.executor
    choice.prepare()
    tools = build_tools(setup, load_task(TASK), tmp_path)
    assert tools.slots == 1 and tools.service.probes
    assert choice.slots() == 1 and choice.kind == "local"
