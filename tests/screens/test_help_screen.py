"""The help screen lists the current screen's bindings, read from the bindings themselves."""

from __future__ import annotations

from textual.widgets import DataTable

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.screens.help import HelpScreen
from tests.support.screens import palette_offers
from tests.support.waiting import until


def make_app(tmp_path, task=None) -> MaxKernelApp:
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    return MaxKernelApp(cache=tmp_path / "cache", settings=settings, task=task)


def listed(app: MaxKernelApp) -> dict[str, tuple[str, str]]:
    table = app.screen.query_one("#keys", DataTable)
    return {
        str(r[0]): (str(r[1]), str(r[2]))
        for r in (table.get_row_at(i) for i in range(table.row_count))
    }


async def test_question_mark_lists_every_binding_of_the_picker(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        picker = app.screen
        expected = {
            app.get_key_display(active.binding) for active in picker.active_bindings.values()
        }
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = listed(app)
        assert set(keys) == expected
        assert keys["d"] == ("Describe tasks (shapes, TPU cost)", "screen")
        assert keys["s"] == ("Sessions", "screen") and keys["c"] == ("Settings", "screen")
        assert keys["f1"] == ("Help", "app")
        await pilot.press("escape")
        assert app.screen is picker


async def test_f1_in_the_workbench_lists_its_keys_and_the_editor_keeps_question_mark(
    tmp_path, suite_tasks
):
    app = make_app(tmp_path, task=find_task("12p", suite_tasks))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press(
            "question_mark"
        )  # typed into the focused code editor, not a help key there
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        keys = listed(app)
        assert keys["^e"] == ("Evaluate", "screen") and keys["^o"] == ("Profile", "screen")
        assert "TextArea" in {
            where for _, where in keys.values()
        }  # the focused editor's own keys too
        await pilot.press("f1")
        assert not isinstance(app.screen, HelpScreen)


async def test_help_from_the_command_palette_lists_the_screen_below_it(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+p", *"help")
        await until(pilot, lambda: palette_offers(app, "help"))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert listed(app)["d"] == (
            "Describe tasks (shapes, TPU cost)",
            "screen",
        )  # the picker's, not the palette's
