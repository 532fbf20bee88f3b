"""SVG snapshots of the task picker and the workbench, compared with files under snapshots/.

pytest-textual-snapshot would pin pytest below 9 (through syrupy), so the comparison is ours:
`App.export_screenshot()` at a fixed size and theme, with temporary paths replaced. On a
difference the test shows the screen as text, line by line, and keeps the new SVG in the test's
temporary directory. `UPDATE_SNAPSHOTS=1 pytest tests/screens/test_snapshots.py` rewrites them.
"""

from __future__ import annotations

import difflib
import io
import os
from pathlib import Path

import pytest
from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import TextArea
from textual.widgets._footer import FooterKey

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import find_task
from tests.fakes.role_provider import RoleProvider
from tests.support.screens import plan
from tests.support.waiting import until

SNAPSHOTS = Path(__file__).parent / "snapshots"
SIZE = (140, 40)
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"


def screen_text(app: App[object]) -> str:
    """The screen as plain text, as export_screenshot draws it (for readable differences)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        record=True,
        color_system="truecolor",
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


def normalised_svg(app: App[object], *paths: Path) -> str:
    svg = app.export_screenshot(title="maxkernel-tui")
    for path in paths:  # a temporary directory would differ on every run
        svg = svg.replace(str(path), "TMP")
    return svg


def assert_snapshot(name: str, app: App[object], tmp_path: Path) -> None:
    svg = normalised_svg(app, tmp_path)
    expected_file = SNAPSHOTS / f"{name}.svg"
    text = screen_text(app).replace(str(tmp_path), "TMP")
    if UPDATE or not expected_file.is_file():
        SNAPSHOTS.mkdir(exist_ok=True)
        expected_file.write_text(svg, encoding="utf-8")
        (SNAPSHOTS / f"{name}.txt").write_text(text, encoding="utf-8")
        assert not os.environ.get("CI"), f"{expected_file} was missing: written, commit it"
        return
    if svg == expected_file.read_text(encoding="utf-8"):
        return
    (tmp_path / f"{name}.svg").write_text(svg, encoding="utf-8")
    expected_text = (SNAPSHOTS / f"{name}.txt").read_text(encoding="utf-8")
    diff = "\n".join(
        difflib.unified_diff(
            expected_text.splitlines(), text.splitlines(), "expected", "actual", lineterm="", n=1
        )
    )
    raise AssertionError(
        f"{name} differs from {expected_file} (new SVG: {tmp_path / name}.svg; "
        f"UPDATE_SNAPSHOTS=1 rewrites)\n{diff or '(same text: colours or styles differ)'}"
    )


async def steady_cursors(pilot: Pilot[object]) -> None:
    """A blinking cursor is in the frame or not depending on the instant of the capture: stop
    the blinking (a focused editor then always draws its cursor)."""
    for editor in pilot.app.screen.query(TextArea):
        editor.cursor_blink = False
    await pilot.pause()


def footer_drawn(app: App[object], key: str = "Evaluate") -> bool:
    """The footer's keys are on screen, `key`'s among them (the footer fills in a few frames
    after the panes)."""
    return bool(app.screen.query(FooterKey)) and key in screen_text(app).splitlines()[-1]


def settings_in(tmp_path: Path):
    return load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )


async def test_task_picker_snapshot(tmp_path):
    app = MaxKernelApp(
        cache=tmp_path / "cache", settings=settings_in(tmp_path)
    )  # no descriptions cached
    async with app.run_test(size=SIZE) as pilot:
        # on a loaded machine the footer can still be blank after the first pause
        await until(pilot, lambda: footer_drawn(app, "Describe tasks"))
        assert_snapshot("task_picker", app, tmp_path)


async def test_workbench_snapshot(tmp_path, suite_tasks):
    app = MaxKernelApp(
        cache=tmp_path / "cache", task=find_task("12p", suite_tasks), settings=settings_in(tmp_path)
    )
    async with app.run_test(size=SIZE) as pilot:
        await steady_cursors(pilot)
        # Checked again right before the capture, with no await in between: the footer redraws
        # (blank for a frame) when the bindings change, e.g. once the harness has warmed up.
        await until(pilot, lambda: footer_drawn(app))
        assert_snapshot("workbench", app, tmp_path)


@pytest.mark.slow  # a real session starts: the store, the engine and the harness's workers
async def test_approval_view_snapshot(tmp_path, suite_tasks, suite_cache, monkeypatch):
    """The workbench with the planner's proposal waiting for a key: its header, keys and text."""
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(suite_cache))
    provider = RoleProvider({"planner": [plan("Row blocks of 256 rows.")]})
    app = MaxKernelApp(
        cache=tmp_path / "cache",
        task=find_task("12p", suite_tasks),
        settings=settings_in(tmp_path),
        agent_provider=provider,
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        # until the proposal is shown and every event before it is drawn
        screen = app.screen
        await until(
            pilot,
            lambda: screen.agents.proposal is not None and screen.session.settled,
        )
        await steady_cursors(pilot)
        await until(pilot, lambda: footer_drawn(app))
        assert_snapshot("approval", app, tmp_path)
        await pilot.press("escape")
