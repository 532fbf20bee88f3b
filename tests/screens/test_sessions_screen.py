"""The sessions screen: list, filter, export, resume; `--resume` from the command line."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from textual.widgets import DataTable, Input, Static, TextArea

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.screens.sessions import SessionsScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.store import Store
from tests.support.waiting import until, wait_for, wait_for_frame

LATEST = "def computation(x, scale, epsilon):\n    return x  # v2\n"


@pytest.fixture
def sessions(tmp_path):
    """Two sessions: 12p with two kernel versions and an LLM call (updated last), 8p with none."""
    with Store(tmp_path / "data" / "sessions.db") as store:
        gemm = store.create_session("8p_GEMM", "auto")
        rms = store.create_session("12p_RMSNorm", "hitl", title="rmsnorm")
        v1 = store.add_kernel_version(
            rms.id, "def computation(x, scale, epsilon):\n    return x  # v1\n"
        )
        store.add_kernel_version(rms.id, LATEST, parent_id=v1.id)
        store.record_llm_call(
            rms.id,
            model="gemini-2.5-pro",
            provider="gemini",
            prompt_tokens=40000,
            completion_tokens=1203,
            cost=0.38,
            latency_s=3.0,
        )
    return rms, gemm


def make_app(tmp_path, **kwargs) -> MaxKernelApp:
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    return MaxKernelApp(cache=tmp_path / "cache", settings=settings, **kwargs)


def rows(app: MaxKernelApp) -> list[list[str]]:
    table = app.screen.query_one("#sessions", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_picker_counts_sessions_and_s_lists_them_with_usage(tmp_path, sessions):
    rms, gemm = sessions
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert "2 sessions, latest 12p_RMSNorm active (s)" in app.screen.sub_title
        await pilot.press("s")
        assert isinstance(app.screen, SessionsScreen)
        listed = rows(app)
        assert [r[:4] for r in listed] == [
            [rms.id, "12p_RMSNorm", "hitl", "active"],
            [gemm.id, "8p_GEMM", "auto", "active"],
        ]
        best = "v2 not evaluated (latest, none accepted)"
        assert listed[0][4:8] == ["2", best, "41,203", "$0.38"]
        await pilot.press("escape")
        assert type(app.screen).__name__ == "TaskPickerScreen"


async def test_filter_narrows_the_rows_and_escape_clears_it(tmp_path, sessions):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("s", "slash", *"gemm")
        assert app.screen.query_one("#filter", Input).has_focus
        assert [r[1] for r in rows(app)] == ["8p_GEMM"]
        await pilot.press("escape")
        assert [r[1] for r in rows(app)] == ["12p_RMSNorm", "8p_GEMM"]
        assert not app.screen.query_one("#filter", Input).display
        assert isinstance(app.screen, SessionsScreen)  # the first escape only left the filter


async def test_export_writes_into_the_data_dir_and_says_where(tmp_path, sessions):
    rms, _ = sessions
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("s", "e")
        out = tmp_path / "data" / "exports" / rms.id
        assert (out / "12p_RMSNorm.py").read_text().endswith(LATEST)
        assert (out / "12p_RMSNorm.md").is_file()
        assert str(out / "12p_RMSNorm.py") in str(app.screen.query_one("#status", Static).content)
        await pilot.press("down", "e")  # 8p has no kernel: said, nothing written
        assert not (tmp_path / "data" / "exports" / sessions[1].id).exists()
        await pilot.pause()
        assert any("has no kernel yet" in str(n.message) for n in app._notifications)


async def test_enter_resumes_in_the_workbench_with_the_latest_kernel(tmp_path, sessions):
    kernel = tmp_path / "data" / "workbench" / "12p_RMSNorm" / "kernel.py"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("# my unsaved experiment\n")
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("s", "enter")
        assert isinstance(app.screen, WorkbenchScreen)
        assert app.screen.kernel_task.task_id == "12p_RMSNorm"
        assert app.screen.query_one("#source", TextArea).text == LATEST
        with Store(tmp_path / "data" / "sessions.db") as store:  # kept as a version, not lost
            kept = store.kernel_versions(sessions[0].id)[-1]
        assert (kept.number, kept.source) == (3, "# my unsaved experiment\n")
        await pilot.press("f6")  # back to it
        await until(pilot, lambda: kernel.read_text() == "# my unsaved experiment\n")
        assert app.screen.query_one("#source", TextArea).text == kept.source


@pytest.mark.parametrize("which", ["prefix", "most recent"])
async def test_resume_option_opens_the_workbench(tmp_path, sessions, which):
    rms, _ = sessions
    app = make_app(tmp_path, resume=rms.id[:6] if which == "prefix" else "")
    async with app.run_test(size=(160, 48)):
        assert isinstance(app.screen, WorkbenchScreen)
        assert app.screen.query_one("#source", TextArea).text == LATEST


def run_cli(tmp_path, *args):
    env = {
        "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
        "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        [sys.executable, "-m", "maxkernel_tui.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_resume_an_unknown_session_is_a_clear_error(tmp_path, sessions):
    done = run_cli(tmp_path, "--resume", "zzz")
    assert done.returncode == 2 and done.stderr.startswith("error: no session 'zzz' in ")
    done = run_cli(tmp_path / "empty", "--resume")
    assert done.returncode == 2 and "no sessions yet" in done.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_real_terminal_resume_shows_the_session_kernel(tmp_path, sessions):
    tmux = ["tmux", "-L", f"mkt-resume-{tmp_path.name}"]
    command = (
        f"env -i HOME={tmp_path} PATH=/usr/bin:/bin TERM=xterm-256color "
        f"MAXKERNEL_TUI_DATA_DIR={tmp_path / 'data'} MAXKERNEL_TUI_CONFIG={tmp_path / 'none.toml'} "
        f"{sys.executable} -m maxkernel_tui.cli --resume; "
        f"echo EXITED $? > {tmp_path / 'exit'}; sleep 30"
    )
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command], check=True
    )
    try:
        wait_for_frame(tmux, "return x  # v2", "12p_RMSNorm ─ HITL")
        subprocess.run([*tmux, "send-keys", "-t", "t", "C-q"], check=True)
        assert (
            wait_for(
                lambda: (tmp_path / "exit").exists() and (tmp_path / "exit").read_text()
            ).strip()
            == "EXITED 0"
        )
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)


async def test_a_hostile_task_id_is_listed_as_text(tmp_path):
    """A task folder's id with terminal controls and Rich markup: the row shows it as written,
    controls as escapes, markup unread."""
    from tests.support.hostile_text import HOSTILE, live_controls

    with Store(tmp_path / "data" / "sessions.db") as store:
        store.create_session(HOSTILE, "hitl")
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("s")
        assert isinstance(app.screen, SessionsScreen)
        task_cell = rows(app)[0][1]
        assert live_controls(task_cell) == [] and "[bold]loud[/bold]" in task_cell
        await pilot.pause()
