"""Every new command answers --help."""

import pytest


@pytest.mark.parametrize(
    "command, words",
    [
        ("sessions", ["--json", "--data-dir"]),
        ("export", ["SESSION", "--out"]),
        ("doctor", ["--json", "--provider", "--base-url"]),
        ("config", ["--json", "--budget-usd", "--tpu"]),
    ],
)
def test_help(run_cli, command, words):
    out = run_cli(command, "--help").stdout
    assert out.startswith(f"usage: maxkernel-tui {command}")
    assert all(word in out for word in words)
