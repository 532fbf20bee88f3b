"""What the screens ask of the app goes by posted messages the app handles in one place: a chosen
task opens in the workbench, and a promoted kernel becomes the workbench's source (the kernel it
replaces is kept as a version, and f6 brings it back)."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from maxkernel_tui.screens.messages import KernelPromoted
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.store import Store
from tests.support.waiting import until

SIZE = (160, 48)
PROMOTED = "def computation(x, scale, epsilon):\n    return x  # promoted\n"


def make_app(tmp_path) -> MaxKernelApp:
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    return MaxKernelApp(cache=tmp_path / "cache", settings=settings)


async def test_enter_on_a_task_opens_it_in_the_workbench(tmp_path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one("#tasks", DataTable)
        await pilot.press("down", "enter")
        workbench = await until(pilot, lambda: isinstance(app.screen, WorkbenchScreen))
        assert workbench and app.screen.kernel_task.task_id == str(table.get_row_at(1)[0])


async def test_a_promoted_kernel_becomes_the_workbench_source(tmp_path, suite_tasks) -> None:
    task = find_task("12p", suite_tasks)
    earlier = tmp_path / "data" / "workbench" / task.task_id / "kernel.py"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("# the engineer's kernel\n")
    with Store(tmp_path / "data" / "sessions.db") as store:
        search = store.create_session(task.task_id, "graph")
        store.add_kernel_version(search.id, PROMOTED)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.screen.post_message(KernelPromoted(task, PROMOTED, "search node #3", search.id))
        await until(pilot, lambda: isinstance(app.screen, WorkbenchScreen))
        assert app.screen.source.text == PROMOTED
        assert earlier.read_text() == PROMOTED
        with Store(tmp_path / "data" / "sessions.db") as store:  # kept as a version, not lost
            kept = store.kernel_versions(search.id)[-1]
        assert (kept.number, kept.source) == (2, "# the engineer's kernel\n")
        await pilot.press("f6")  # back to it
        await until(pilot, lambda: app.screen.source.text == "# the engineer's kernel\n")
        assert earlier.read_text() == "# the engineer's kernel\n"


@pytest.mark.parametrize("style", ["maxkernel", "jaxbench"])
async def test_o_opens_a_task_folder_typed_on_a_line(tmp_path, style) -> None:
    """The picker opens the engineer's own folder (MaxKernel's plain format or JAXBench's
    native one); a missing path, a file or a folder without a task is said, and the line keeps
    what was typed."""
    from textual.widgets import Input, Static

    from tests.support.task_folders import write_jaxbench, write_plain

    folder = (
        write_plain(tmp_path / "mine", "36k_Matmul_Sigmoid_Sum")
        if style == "maxkernel"
        else write_jaxbench(tmp_path / "mine")
    )
    (tmp_path / "empty").mkdir()
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        picker = app.screen
        status = picker.query_one("#status", Static)
        field = picker.query_one("#folder", Input)
        for typed, said in [
            (str(tmp_path / "nope"), "no such task folder"),
            (str(folder / "reference.py" if style == "maxkernel" else folder / "baseline.py"),
             "a file, not a folder"),
            (str(tmp_path / "empty"), "not a task folder: it holds neither kernel_task.yaml"),
        ]:  # fmt: skip
            await pilot.press("o")
            assert field.display and field.has_focus
            field.value = typed
            await pilot.press("enter")
            await until(pilot, lambda said=said: said in str(status.content))
            assert field.value == typed and app.screen is picker
        field.value = str(folder)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, WorkbenchScreen))
        assert app.screen.kernel_task.folder == folder
