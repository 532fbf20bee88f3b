"""`n` in the task picker: the import form, a clear error that keeps what was typed, and on
success the workbench on the new task (validated in a worker; the UI never imports jax)."""

from __future__ import annotations

import textwrap

import pytest
from textual.widgets import Input, Static

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.screens.task_import import TaskImportScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from tests.support.waiting import until

SIZE = (160, 48)


def _app(tmp_path) -> MaxKernelApp:
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    return MaxKernelApp(cache=tmp_path / "cache", settings=settings)


async def _fill(pilot, app, **values: str) -> None:
    for name, value in values.items():
        app.screen.query_one(f"#{name}", Input).value = value
    await pilot.pause()


async def test_n_opens_the_form_and_a_bad_file_is_an_error_that_keeps_the_fields(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, TaskImportScreen))
        await _fill(pilot, app, file=str(tmp_path / "missing.py"), args="f32[8]")
        await pilot.click("#import")
        message = app.screen.query_one("#message", Static)
        await until(pilot, lambda: "error:" in str(message.content))
        assert "no such file" in str(message.content)
        assert app.screen.query_one("#args", Input).value == "f32[8]"
        await pilot.press("escape")
        assert not isinstance(app.screen, TaskImportScreen)


@pytest.mark.slow  # the reference is validated in a jax worker process
async def test_an_imported_function_opens_in_the_workbench(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(
        textwrap.dedent(
            """
            import jax


            def gemm_relu(x, w):
                return jax.nn.relu(x @ w)
            """
        )
    )
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, TaskImportScreen))
        await _fill(pilot, app, file=str(source), args="f32[256,512] f32[512,256]")
        await pilot.click("#import")
        await until(pilot, lambda: isinstance(app.screen, WorkbenchScreen), timeout=300)
        task = app.screen.kernel_task
        assert task.task_id == "mine" and task.configs == ("bench", "check", "heldout")
        assert task.folder == (tmp_path / "data" / "imported" / "mine").resolve()
