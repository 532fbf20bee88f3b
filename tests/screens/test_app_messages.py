"""What the screens ask of the app goes by posted messages the app handles in one place: a chosen
task opens in the workbench, and a promoted kernel becomes the workbench's source (the kernel it
replaces is kept as a version, and f6 brings it back)."""

from __future__ import annotations

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
        assert workbench and app.screen.kernel_task.task_id == table.get_row_at(1)[0]


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
