"""The task picker in a headless Textual app, and the real program in a real terminal (tmux)."""

import os
import shutil
import subprocess
import sys

import pytest
from textual.widgets import DataTable, Static, TextArea

from maxkernel_tui.app import MaxKernelApp
from tests.support.paths import ADAPTED_TASKS
from tests.support.waiting import wait_for, wait_for_frame


@pytest.mark.slow  # every task described first, in jax worker processes
async def test_lists_builtin_tasks_and_shows_the_highlighted_reference(
    suite_descriptions, suite_cache
):
    app = MaxKernelApp(cache=suite_cache)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one("#tasks", DataTable)
        assert table.row_count == 50 + 4  # the JAXBench tasks, then the training group
        assert str(table.get_row_at(50)[0]) == "1t_RMSNorm_Training"
        assert str(table.get_row_at(50)[1]) == "training"
        assert "4 training" in app.screen.sub_title
        assert str(table.get_row_at(0)[0]) == "1p_Flash_Attention"
        gflop, target = str(table.get_row_at(7)[2]).split()  # 8p_GEMM, from the cache
        assert float(gflop.replace(",", "")) == pytest.approx(
            2 * 8192 * 8192 * 28672 / 1e9, rel=1e-3
        )
        assert target == "v5e"
        await pilot.press("down")
        source = app.screen.query_one("#source", TextArea)
        assert (
            "def computation(" in source.text and source.language == "python" and source.read_only
        )
        assert "2p_GQA_Attention  [attention]" in str(
            app.screen.query_one("#summary", Static).content
        )


@pytest.mark.slow  # describes the tasks in jax worker processes
async def test_describe_runs_in_workers_and_updates_rows(tmp_path):
    app = MaxKernelApp(tasks_dir=ADAPTED_TASKS, cache=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one("#tasks", DataTable)
        assert str(table.get_row_at(0)[2]) == "…"
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert str(table.get_row_at(0)[2]) == "0.0 v5e"
        summary = str(app.screen.query_one("#summary", Static).content)
        assert "1_Vector_Add  [custom]" in summary
        # its shape literal 4096 is a size: check and heldout are derived from it
        assert "bench              f32[4096] f32[4096]  static (2.0,) -> f32[4096]" in summary
        assert "check (derived)    f32[2048] f32[2048]  static (2.0,) -> f32[2048]" in summary
        assert "all tasks described" in str(app.screen.query_one("#status", Static).content)


@pytest.mark.slow  # the real program in a real terminal
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_real_terminal_opens_and_quits(suite_descriptions, suite_cache, tmp_path):
    socket = f"mkt-test-{os.getpid()}"
    tmux = ["tmux", "-L", socket]
    env = f"MAXKERNEL_TUI_CACHE_DIR={suite_cache} TERM=xterm-256color"
    command = (
        f"env {env} {sys.executable} -m maxkernel_tui.cli; "
        f"echo EXITED $? > {tmp_path / 'exit'}; sleep 30"
    )
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command], check=True
    )
    try:
        wait_for_frame(tmux, "12p_RMSNorm", "maxkernel-tui", "1p_Flash_Attention")
        subprocess.run([*tmux, "send-keys", "-t", "t", "Down"], check=True)
        wait_for_frame(tmux, "│ 2p_GQA_Attention")  # the summary follows the cursor
        subprocess.run([*tmux, "send-keys", "-t", "t", "q"], check=True)
        assert (
            wait_for(
                lambda: (tmp_path / "exit").exists() and (tmp_path / "exit").read_text()
            ).strip()
            == "EXITED 0"
        )
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
async def test_every_column_of_the_list_is_shown_whole(tmp_path, size):
    """The category and GFLOP columns are never pushed out of view by a long task id
    (46k_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp, 57 characters); a long id ends
    in "…" in the list and is whole in the detail."""
    app = MaxKernelApp(cache=tmp_path / "cache")
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#tasks", DataTable)
        widths = [column.get_render_width(table) for column in table.columns.values()]
        assert sum(widths) <= table.scrollable_content_region.width
        assert {str(table.get_row_at(row)[1]) for row in range(table.row_count)} >= {"attention"}
        ids = [str(table.get_row_at(row)[0]) for row in range(table.row_count)]
        assert "46k_Conv2d_GroupNorm_Tanh_Har…" in ids
