"""The task picker describes the task the cursor rests on by itself, in the background, without
holding up the first frame, and stops describing when the picker goes away; `d` still describes
them all. The describing is faked here (it runs jax worker processes; `run_requests`'s own test
shows that a stop kills them)."""

from __future__ import annotations

import threading

from textual.app import App
from textual.widgets import DataTable, Static

from maxkernel_tui.kernels import catalog
from maxkernel_tui.kernels.description import ConfigShapes, TaskDescription, TensorSpec, XlaCost
from maxkernel_tui.screens import task_picker
from maxkernel_tui.screens.task_picker import TaskPickerScreen
from tests.support.paths import ADAPTED_TASKS
from tests.support.waiting import until


class Picker(App[None]):
    def __init__(self, cache) -> None:
        super().__init__()
        self.picker = TaskPickerScreen(tasks_dir=ADAPTED_TASKS, cache=cache)

    def on_mount(self) -> None:
        self.push_screen(self.picker)


async def test_the_highlighted_task_is_described_in_the_background(tmp_path, monkeypatch):
    asked: list[list[str]] = []
    release = threading.Event()

    def describe(tasks, cache, *, workers=2, on_progress=None, stop=None, **options):
        asked.append([t.task_id for t in tasks])
        release.wait(30)  # a slow describe: the screen must not wait for it
        vector = TensorSpec([4096], "float32")
        shapes = {"bench": ConfigShapes([vector, vector], [2.0], [vector])}
        for task in tasks:
            cost = XlaCost(config="bench", target="v5e", flops=2e9, bytes_accessed=5e4)
            found = TaskDescription(
                str(task.folder), catalog.FORMAT_VERSION, task.task_id, shapes, cost
            )
            if on_progress is not None:
                on_progress(task.task_id, found)
        return {}

    monkeypatch.setattr(task_picker, "describe_tasks", describe)
    app = Picker(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        summary = app.picker.query_one("#summary", Static)
        await until(pilot, lambda: asked)  # nobody pressed d
        first = str(app.picker.query_one("#tasks", DataTable).get_row_at(0)[0])
        assert asked == [[first]]
        assert "describing it in the background" in str(summary.content)
        release.set()
        table = app.picker.query_one("#tasks", DataTable)
        await until(pilot, lambda: str(table.get_row_at(0)[2]) == "2.0 v5e")
        assert "describing it in the background" not in str(summary.content)


async def test_leaving_the_picker_stops_the_background_describing(tmp_path, monkeypatch):
    began = threading.Event()
    stopped: list[bool] = []
    ended = threading.Event()

    def describe(tasks, cache, *, workers=2, on_progress=None, stop=None, **options):
        began.set()
        stopped.append(stop is not None and stop.wait(30))  # only a stop ends it early
        ended.set()
        return {}

    monkeypatch.setattr(task_picker, "describe_tasks", describe)
    app = Picker(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, began.is_set)
    assert ended.wait(10)
    assert stopped == [True]
