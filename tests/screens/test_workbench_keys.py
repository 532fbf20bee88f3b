"""The workbench as a new user tries it, fast (a recording harness, no worker processes, no
model): a waiting proposal's keys never type into the editor, tab moves the focus, the title
marks unsaved changes, ctrl+e evaluates the editor's text without writing or reading a kernel
file (on the agents' options), help lists the proposal's keys, long error lines wrap, and a worker
that fails (an unreachable Ray head) is shown as an error while the app stays up."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.scroll_view import ScrollView
from textual.widget import Widget
from textual.widgets import RichLog, Static, TextArea

from maxkernel_tui.agents.orchestration.gates import APPROVE, Proposal
from maxkernel_tui.agents.orchestration.tools import build_tools
from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.report.checks import FAIL, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import (
    Problems,
    Reason,
    RuleBroken,
    Said,
    StaticRule,
)
from maxkernel_tui.kernels.service.service import KernelSource
from maxkernel_tui.kernels.service.setup import EvalOptions, EvaluationSetup
from maxkernel_tui.screens.help import key_help
from maxkernel_tui.screens.pane_messages import AgentsMessage, Streamed, TestsMessage
from maxkernel_tui.screens.source_pane import UNSAVED
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.screens.wrapping_log import OPEN_ROWS
from maxkernel_tui.store.kinds import Mode
from tests.support.screens import status
from tests.support.waiting import until

SIZE = (160, 48)
KERNEL = Proposal(
    step="i1/implement", role="implementer", subject="kernel", content="def computation(x):\n"
    "    return x\n", previous="", summary="identity",
)  # fmt: skip


class RecordingHarness:
    """Answers each evaluation with a rejected report, recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[KernelSource, EvalOptions]] = []

    def evaluate(self, kernel: KernelSource, task, options, on_check=None) -> EvalReport:
        self.asked.append((kernel, options))
        recorded = RuleBroken(StaticRule.NO_ENTRY_POINT, "recorded")
        check = Check("static", FAIL, Reason.STATIC_RULES_BROKEN, Problems((recorded,)))
        if on_check is not None:
            on_check(check)
        report = EvalReport(task.task_id, kernel.name, [options.target], "cpu", checks=[check])
        report.seeds = list(range(options.seeds))
        return report

    def close(self) -> None:
        pass


def make_app(tmp_path: Path, **env: str) -> tuple[MaxKernelApp, RecordingHarness]:
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
            **env,
        }
    )
    harness = RecordingHarness()
    task = load_task(next(builtin_suite_dir().glob("12p_*")))
    app = MaxKernelApp(task=task, settings=settings, cache=tmp_path / "cache", harness=harness)  # type: ignore[arg-type]
    return app, harness


def workbench(app: MaxKernelApp) -> WorkbenchScreen:
    assert isinstance(app.screen, WorkbenchScreen)
    return app.screen


async def offer(pilot, screen: WorkbenchScreen, proposal: Proposal) -> asyncio.Future:
    decision = asyncio.ensure_future(screen.session.gate_for(Mode.HITL).decide(proposal))
    await until(pilot, lambda: screen.agents.proposal is proposal)
    return decision


async def test_a_proposal_key_in_the_focused_editor_decides_and_types_nothing(tmp_path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        before = screen.source.text
        decision = await offer(pilot, screen, KERNEL)
        screen.source.editor.focus()  # the engineer clicks back into the editor
        await pilot.pause()
        assert screen.source.held and UNSAVED not in screen.source.border_title
        await pilot.press("a")
        assert (await asyncio.wait_for(decision, 5)).action == APPROVE
        assert screen.source.text == before
        assert not screen.source.held  # decided: the editor types again
        await pilot.press("x")
        assert screen.source.text == "x" + before


async def test_tab_moves_the_focus_out_of_the_editor(tmp_path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        before = screen.source.text
        assert app.focused is screen.source.editor
        await pilot.press("tab")
        assert app.focused is not screen.source.editor
        assert screen.source.text == before


async def test_the_title_marks_unsaved_changes_until_saved(tmp_path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        assert UNSAVED not in screen.source.border_title
        await pilot.press("#")
        await until(pilot, lambda: UNSAVED in screen.source.border_title)
        await pilot.press("backspace")  # back to what is saved: nothing to mark
        await until(pilot, lambda: UNSAVED not in screen.source.border_title)
        await pilot.press("#", "ctrl+s")
        await until(pilot, lambda: UNSAVED not in screen.source.border_title)
        assert screen.source.kernel_path.read_text(encoding="utf-8").startswith("#")


async def test_ctrl_e_evaluates_the_editor_leaves_the_file_and_uses_the_agents_options(
    tmp_path,
) -> None:
    app, harness = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        saved = screen.source.save()
        await pilot.press("#", "ctrl+e")
        await until(pilot, lambda: any(line.startswith("verdict") for line in screen.tests.lines))
        ((kernel, options),) = harness.asked
        assert kernel.text == "#" + saved  # the editor's source, unsaved, sent as text
        assert kernel.name == screen.source.kernel_path.name
        assert screen.source.kernel_path.read_text(encoding="utf-8") == saved  # file untouched
        # no copy of the editor written for the evaluation to read back
        assert [p.name for p in screen.source.kernel_path.parent.glob("**/*.py")] == ["kernel.py"]
        assert UNSAVED in screen.source.border_title
        agents_tools = build_tools(
            EvaluationSetup.of(app.settings), screen.kernel_task, tmp_path, None
        )
        assert options == agents_tools.options  # ctrl+e and the agents: the same options
        assert f"{options.seeds} seed(s)" in screen.tests.lines[-1]
        assert screen.tests.lines[-1].endswith("on local")
        assert "─ idle ─" in status(app)


async def test_help_lists_the_proposal_keys_while_one_waits_in_the_editor(tmp_path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        await offer(pilot, screen, KERNEL)
        screen.source.editor.focus()
        await pilot.pause()
        keys = {row.key: row for row in key_help(app, screen)}
        for key, words in (("a", "Approve"), ("e", "Edit"), ("r", "Reject")):
            assert key in keys and words in keys[key].description and keys[key].enabled
        assert "f1" in keys and "^e" in keys


async def test_a_long_error_line_wraps_at_the_pane_edge(tmp_path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = workbench(app)
        tail = "the last words of a long error"
        error = "TypeError: cannot " + "unpack a block of the wrong rank " * 6 + tail
        check = Check("trace", FAIL, Reason.TRACE_REFUSED, Said(error), 0.1)  # words: the error
        screen.tests.post_message(TestsMessage([check]))
        log = screen.tests.query_one(RichLog)

        def shown() -> str:
            return "\n".join(strip.text for strip in log.lines)

        await until(pilot, lambda: tail in shown().replace("\n", " "))
        assert all(len(strip.text.rstrip()) <= log.size.width for strip in log.lines)
        assert len(log.lines) >= 3  # the intro and the error, on several lines


def rows_shown(pane: Widget) -> list[str]:
    """The rows the pane's scrolling logs draw, top to bottom, as text (whatever log it uses)."""
    return [
        log.render_line(y).text for log in pane.query(ScrollView) for y in range(log.size.height)
    ]


async def test_a_long_agent_line_wraps_at_the_pane_edge(tmp_path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = workbench(app)
        tail = "the last words of a long error"
        error = "debugger ▸ error: TypeError: cannot " + "unpack a block of rank 3 " * 8 + tail
        screen.agents.post_message(AgentsMessage([error]))
        await until(
            pilot, lambda: tail in " ".join(r.strip() for r in rows_shown(screen.agents)), 20
        )
        rows = [row.rstrip() for row in rows_shown(screen.agents) if row.strip()]
        assert len(rows) >= 3 and rows[0].startswith("debugger ▸ error: TypeError: cannot unpack")
        assert screen.agents.lines[-1] == error  # kept whole, only shown wrapped
        log = screen.agents.query_one(RichLog)
        wide = log.size.width
        await offer(pilot, screen, KERNEL)  # the proposal takes most of the pane's width
        narrowed = lambda: log.size.width < wide / 2 and log.virtual_size.width <= wide / 2  # noqa: E731
        await until(pilot, narrowed, 20)
        await pilot.pause()
        assert tail in " ".join(r.strip() for r in rows_shown(screen.agents))
        assert log.virtual_size.width <= log.size.width  # drawn again at the new width


async def test_streamed_agent_text_shows_as_it_comes_and_wraps_once_its_line_ends(
    tmp_path,
) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = workbench(app)
        words = "tiles of 512 rows " * 12
        screen.agents.post_message(AgentsMessage([Streamed("Thinking about "), Streamed(words)]))
        await until(pilot, lambda: screen.agents.lines[-1:] == ["Thinking about " + words])
        open_line = screen.agents.query_one(".open-line", Static)
        await until(pilot, lambda: str(open_line.content) == "Thinking about " + words)
        assert open_line.display and screen.agents.open_text == "Thinking about " + words
        screen.agents.post_message(AgentsMessage([Streamed("done.\nNext"), "planner ▸ plan"]))
        await until(pilot, lambda: screen.agents.lines[-1:] == ["planner ▸ plan"])
        assert not open_line.display and not screen.agents.open_text
        assert screen.agents.lines[-3:] == [
            "Thinking about " + words + "done.",
            "Next",
            "planner ▸ plan",
        ]
        joined = " ".join(r.strip() for r in rows_shown(screen.agents))
        assert "tiles of 512 rows done." in joined and "Next planner ▸ plan" in joined
        screen.agents.post_message(AgentsMessage([Streamed("x" * 5000 + " the newest words")]))
        await until(pilot, lambda: str(open_line.content).endswith("the newest words"))
        shown = str(open_line.content)  # an unfinished line too long for its rows: its tail
        assert shown.startswith("…") and len(shown) <= OPEN_ROWS * screen.agents.size.width


async def test_f5_with_an_unreachable_ray_head_shows_the_error_and_the_app_stays_up(
    tmp_path,
) -> None:
    app, _ = make_app(tmp_path, MAXKERNEL_TUI_RAY="127.0.0.1:1")
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        await pilot.press("f5")
        await until(pilot, lambda: any("error:" in line for line in screen.agents.lines), 60)
        (line,) = [line for line in screen.agents.lines if "error:" in line]
        assert "ClusterError" in line and "127.0.0.1:1" in line
        assert "─ idle ─" in status(app)
        assert app.is_running and isinstance(app.screen, WorkbenchScreen)
        await pilot.press("#")  # still answering keys
        assert screen.source.editor.text.startswith("#")
        assert isinstance(screen.source.editor, TextArea)


async def test_f4_edits_the_plan_in_an_editor_made_on_first_use_and_f4_takes_it(tmp_path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        assert not screen.plan.query("#plan-editor")  # not made for the first frame
        screen.plan.show("1. tile rows by 512")
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.focused, TextArea) and screen.plan.editing)
        editor = app.focused
        assert editor is not screen.source.editor and editor.text == "1. tile rows by 512"
        await pilot.press("end", "!", "f4")
        await until(pilot, lambda: not screen.plan.editing)
        assert screen.plan.text == "1. tile rows by 512!"
        await pilot.press("f4")  # the same editor again, on the plan as it is now
        await until(pilot, lambda: screen.plan.editing and app.focused is editor)
        assert editor.text == "1. tile rows by 512!" and len(screen.plan.query("#plan-editor")) == 1
        await pilot.press("ctrl+s")  # ctrl+s takes it too
        await until(pilot, lambda: not screen.plan.editing)
        assert screen.source.text.startswith('"""12p_RMSNorm')  # nothing typed into the kernel


async def test_opened_on_a_task_the_workbench_is_the_first_screen_not_pushed_over_an_empty_one(
    tmp_path,
) -> None:
    """Pushed over Textual's empty first screen, the workbench was laid out twice before its
    first frame (benchmarks/first_frame.py)."""
    app, _ = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = workbench(app)
        assert app.screen_stack == [screen]
        await pilot.press("ctrl+s")  # its keys and session work as when it was pushed
        assert (tmp_path / "data" / "workbench" / "12p_RMSNorm" / "kernel.py").is_file()
