"""The workbench: edit the source, evaluate and profile it from the keyboard."""

import shutil
import subprocess
import sys
import time

import pytest
from textual.widgets import DataTable, Static, TextArea

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from tests.support.paths import KERNELS
from tests.support.task_folders import write_plain
from tests.support.waiting import wait_for, wait_for_frame

pytestmark = pytest.mark.slow  # the real harness (worker processes) and a real terminal


def make_app(tmp_path, suite_tasks, task_id="12p"):
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    return MaxKernelApp(
        cache=tmp_path / "cache", task=find_task(task_id, suite_tasks), settings=settings
    )


async def test_starter_source_then_edit_and_evaluate(tmp_path, suite_tasks):
    app = make_app(tmp_path, suite_tasks)
    async with app.run_test(size=(160, 48)) as pilot:
        source = app.screen.query_one("#source", TextArea)
        assert (
            "def computation(x, scale, epsilon):" in source.text and "pl.pallas_call" in source.text
        )
        assert "12p_RMSNorm ─ HITL ─ idle ─ v5e (AOT) ─ builtin (offline)" in str(
            app.screen.query_one("#status", Static).content
        )
        source.load_text((KERNELS / "honest" / "12p_RMSNorm.py").read_text())  # the engineer's edit
        await pilot.press("ctrl+e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        lines = app.screen.tests.lines
        assert any(line.startswith("✓ tpu_compile") for line in lines)
        # the workbench's evaluations run in the same OS sandbox as the command line's
        assert any(line.startswith("✓ sandbox") and "ran confined" in line for line in lines)
        assert lines[-2] == "verdict: ACCEPTED, checked at small shapes only"  # tiles off in tests
        saved = tmp_path / "data" / "workbench" / "12p_RMSNorm" / "kernel.py"
        assert not saved.exists()  # evaluated as it is in the editor; only ctrl+s writes the file


async def test_evaluating_the_starter_says_why_it_is_rejected(tmp_path, suite_tasks):
    app = make_app(tmp_path, suite_tasks)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        lines = app.screen.tests.lines
        # the skeleton copies x whole into VMEM: 512 MiB at production shapes, which the TPU
        # compile refuses
        assert lines[-2].startswith("verdict: REJECTED: tpu_compile: TPU v5e compile failed")
        assert "RESOURCE_EXHAUSTED" in lines[-2]


async def test_profile_fills_the_table_and_the_roofline_bar(tmp_path, suite_tasks):
    app = make_app(tmp_path, suite_tasks)
    (tmp_path / "data" / "workbench" / "12p_RMSNorm").mkdir(parents=True)
    shutil.copy(
        KERNELS / "honest" / "12p_RMSNorm.py",
        tmp_path / "data" / "workbench" / "12p_RMSNorm" / "kernel.py",
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+o")
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#profile", DataTable)
        # the agents' profile: the session's TPU generation
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == ["v5e"]
        assert str(table.get_row_at(0)[3]) == "memory"
        roofline = str(app.screen.query_one("#roofline", Static).content)
        assert (
            "% of roofline (estimated)" in roofline and "timing: not measured (no TPU)" in roofline
        )


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_real_terminal_workbench_with_an_empty_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    socket = f"mkt-wb-{tmp_path.name}"
    tmux = ["tmux", "-L", socket]
    command = (
        f"env -i HOME={home} PATH=/usr/bin:/bin TERM=xterm-256color "
        f"{sys.executable} -m maxkernel_tui.cli --task 12p_RMSNorm; "
        f"echo EXITED $? > {tmp_path / 'exit'}; sleep 30"
    )
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command], check=True
    )
    try:
        # the four pane titles ("╭─ Plan ─…") and the source, in one frame
        wait_for_frame(tmux, "─ Plan", "─ Source", "─ Tests", "─ Profile", "pl.pallas_call")
        subprocess.run([*tmux, "send-keys", "-t", "t", "C-q"], check=True)
        assert (
            wait_for(
                lambda: (tmp_path / "exit").exists() and (tmp_path / "exit").read_text()
            ).strip()
            == "EXITED 0"
        )
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_real_terminal_approve_with_the_editor_focused_types_nothing(tmp_path, suite_cache):
    """F5, the planner's plan waits; tab puts the focus in the editor (as a click would); `a`
    approves the plan (the implementer's kernel is proposed next) and the source is unchanged."""
    home = tmp_path / "home"
    home.mkdir()
    socket = f"mkt-wb-approve-{tmp_path.name}"
    tmux = ["tmux", "-L", socket]
    env = (
        f"env -i HOME={home} PATH=/usr/bin:/bin TERM=xterm-256color JAX_PLATFORMS=cpu "
        f"MAXKERNEL_TUI_CACHE_DIR={suite_cache} MAXKERNEL_TUI_DATA_DIR={tmp_path / 'data'}"
    )
    command = f"{env} {sys.executable} -m maxkernel_tui.cli --task 12p_RMSNorm; sleep 30"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command], check=True
    )
    try:
        wait_for_frame(tmux, "─ Source", '1  """12p_RMSNorm')
        subprocess.run([*tmux, "send-keys", "-t", "t", "F5"], check=True)
        wait_for_frame(tmux, "proposes a plan", "read-only while a proposal waits", timeout=180)
        subprocess.run([*tmux, "send-keys", "-t", "t", "Tab"], check=True)
        subprocess.run([*tmux, "send-keys", "-t", "t", "a"], check=True)
        after = wait_for_frame(tmux, "proposes a kernel", timeout=180)
        assert '1  """12p_RMSNorm' in after and '1  a"""' not in after  # the starter, untouched
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_real_terminal_quits_at_once_while_f5_starts_the_session(tmp_path):
    """ctrl+q while F5 describes a production-size plain folder with a cold cache and the
    built-in agent drafts ahead: the process ends without waiting for either (110 s with the
    drafting in the loop's executor, whose threads the exit joins), with exit status 0."""
    task = write_plain(tmp_path / "tasks", "36k_Matmul_Sigmoid_Sum", tol=0.01)
    home = tmp_path / "home"
    home.mkdir()
    socket = f"mkt-wb-quit-{tmp_path.name}"
    tmux = ["tmux", "-L", socket]
    env = (
        f"env -i HOME={home} PATH=/usr/bin:/bin TERM=xterm-256color JAX_PLATFORMS=cpu "
        f"MAXKERNEL_TUI_CACHE_DIR={tmp_path / 'cache'} MAXKERNEL_TUI_DATA_DIR={tmp_path / 'data'}"
    )
    exit_file = tmp_path / "exit"
    app = f"{sys.executable} -m maxkernel_tui.cli --task {task}"
    command = f"{env} {app}; echo EXITED $? > {exit_file}; sleep 30"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command], check=True
    )
    try:
        wait_for_frame(tmux, "─ Source", "─ Tests")
        subprocess.run([*tmux, "send-keys", "-t", "t", "F5"], check=True)
        wait_for_frame(tmux, "starting: describing 36k_Matmul_Sigmoid_Sum")
        began = time.monotonic()
        subprocess.run([*tmux, "send-keys", "-t", "t", "C-q"], check=True)
        ended = wait_for(lambda: exit_file.exists() and exit_file.read_text().strip(), 60)
        assert time.monotonic() - began < 10  # not the description's tens of seconds
        assert ended == "EXITED 0"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
