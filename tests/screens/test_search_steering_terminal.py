"""Steering a running search on a real terminal: the CLI on a plain task folder, F3 hands the
workbench to a graph search with the built-in agent, `i` on the root gives an idea, and the
idea's node appears in the tree at the search's next round."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.support.task_folders import write_plain_small
from tests.support.waiting import wait_for_frame

IDEA = "keep the sigmoid in the epilogue"

# the whole product through the CLI, a search of real evaluations: minutes
pytestmark = [pytest.mark.slow, pytest.mark.heavy]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_an_idea_given_to_a_running_search_grows_its_node(tmp_path, suite_cache) -> None:
    task = write_plain_small(tmp_path / "tasks", "36k_Matmul_Sigmoid_Sum")
    home = tmp_path / "home"
    home.mkdir()
    tmux = ["tmux", "-L", f"mkt-search-steer-{tmp_path.name}"]
    env = (
        f"env -i HOME={home} PATH=/usr/bin:/bin TERM=xterm-256color JAX_PLATFORMS=cpu "
        f"MAXKERNEL_TUI_CACHE_DIR={suite_cache} MAXKERNEL_TUI_DATA_DIR={tmp_path / 'data'}"
    )
    command = f"{env} {sys.executable} -m maxkernel_tui.cli --task {task}; sleep 30"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "180", "-y", "50", command], check=True
    )

    def keys(*pressed: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", "t", *pressed], check=True)

    try:
        wait_for_frame(tmux, "─ Source", "─ Tests")
        keys("F3")
        wait_for_frame(tmux, "search ─ 36k_Matmul_Sigmoid_Sum", "─ running", timeout=120)
        # the idea is given while the root is judged (the tree's cursor is on it): 36k's seed is
        # at the model's headroom floor, so the search would end at round 1 with no idea waiting
        wait_for_frame(tmux, "#0 …", timeout=600)
        keys("i")
        wait_for_frame(tmux, "an idea for the implementer")
        keys("-l", IDEA)
        keys("Enter")
        wait_for_frame(tmux, "steering:", f'idea at #0: "{IDEA}"')
        wait_for_frame(tmux, " idea ← #0", "its node in round", timeout=900)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
