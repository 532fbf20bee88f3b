"""Steering the agents from the workbench (Pilot, and once on a real terminal): on a plain task
folder, the built-in agent answers `r` with a reason by another kernel (and says what it read),
and once everything it can write is turned down it says it has nothing else while the session
stays open for the engineer's message; `f5` after a session ended says why it ended and starts a
new one from the editor's kernel. The store and the built-in agent's worker are real (slow)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from textual.widgets import Static

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.kernels.loader import load_task
from tests.fakes.role_provider import RoleProvider
from tests.support import waiting
from tests.support.screens import GOOD, plan, workbench_state
from tests.support.task_folders import write_plain_small
from tests.support.waiting import wait_for_frame

SIZE = (160, 48)
REASON = "fuse the sigmoid and row sum into the matmul epilogue"
pytestmark = pytest.mark.slow  # worker processes: the agent's, the task's description


@pytest.fixture
def make_app(tmp_path, suite_cache, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_TUI_CACHE_DIR", str(suite_cache))
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    task = load_task(write_plain_small(tmp_path / "tasks", "36k_Matmul_Sigmoid_Sum"))

    def make(provider=None) -> MaxKernelApp:
        return MaxKernelApp(
            cache=tmp_path / "cache", task=task, settings=settings, agent_provider=provider
        )

    return make


async def until(pilot, condition, timeout: float = 240.0):
    return await waiting.until(
        pilot, condition, timeout, describe=lambda: workbench_state(pilot.app)
    )


def pending(app):
    return app.screen.agents.proposal


def kernel_waits(app):
    proposal = pending(app)
    return proposal if proposal is not None and proposal.subject == "kernel" else None


def activity(app) -> str:
    return "\n".join(app.screen.agents.lines) + app.screen.agents.open_text


async def reject(pilot, reason: str) -> None:
    await pilot.press("r")
    await pilot.press(*reason, "enter")


async def test_reject_with_a_reason_and_the_builtin_agent_offers_another_or_says_why(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        await until(pilot, lambda: (p := pending(app)) is not None and p.subject == "plan")
        await pilot.press("a")
        first = (await until(pilot, lambda: kernel_waits(app))).content
        await reject(pilot, REASON)
        second = await until(
            pilot, lambda: (p := kernel_waits(app)) is not None and p.content != first and p
        )
        assert second.content.count("pallas_call(") == first.count("pallas_call(") == 1
        assert f"“{REASON}”" in activity(app) and "already runs as one pallas_call" in activity(app)
        assert app.screen.session.is_running

        # turned down, one after another: every kernel is new, until it has nothing else
        offered = {first, second.content}
        while not (waiting_now := pending(app)).nothing_new:
            await reject(pilot, "no")
            shown = await until(pilot, lambda: (p := pending(app)) is not waiting_now and p)
            assert shown.nothing_new or shown.content not in offered
            offered.add(shown.content)
        header = str(app.screen.query_one("#proposal-header", Static).content)
        assert "has nothing else to offer" in header
        assert app.screen.session.is_running and app.screen.session.ended() is None

        # a message is what to try: the agent is asked again and says what it read
        asked = pending(app)
        await pilot.press("ctrl+t")
        await pilot.press(*"use smaller blocks", "enter")
        await until(pilot, lambda: "“use smaller blocks”" in activity(app))
        await until(pilot, lambda: (p := pending(app)) is not None and p is not asked)
        assert "you: use smaller blocks (the implementer is asked again" in activity(app)
        assert app.screen.session.is_running
        await pilot.press("escape")


async def test_f5_after_a_session_ended_says_why_and_starts_a_new_one(make_app):
    provider = RoleProvider({})  # no planner answer: the session ends on a model error
    app = make_app(provider)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        ended = await until(pilot, lambda: app.screen.session.ended())
        assert "model error" in ended.reason
        first = app.screen.session.session_id
        await until(pilot, lambda: not app.screen.session.is_running)

        provider.answers["planner"].append(plan("the second session's"))
        app.screen.source.load(GOOD)  # the engineer's kernel, in the editor
        await pilot.press("f5")
        await until(
            pilot, lambda: "F5 starts a new session from the kernel in the editor" in activity(app)
        )
        assert f"session {first} ended (model error" in activity(app)
        await until(pilot, lambda: (p := pending(app)) is not None and p.subject == "plan")
        session = app.screen.session
        assert session.session_id != first
        assert [v.source for v in session.kernel_versions()] == [GOOD]  # it starts from it
        await pilot.press("escape")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_real_terminal_reject_with_a_reason_and_the_session_stays_open(tmp_path, suite_cache):
    """The same on a real terminal, through the CLI on a plain folder: F5, `a` on the plan, `r`
    with a reason on the kernel; the step's next kernel waits, and the session has not ended."""
    task = write_plain_small(tmp_path / "tasks", "36k_Matmul_Sigmoid_Sum")
    home = tmp_path / "home"
    home.mkdir()
    tmux = ["tmux", "-L", f"mkt-wb-steer-{tmp_path.name}"]
    env = (
        f"env -i HOME={home} PATH=/usr/bin:/bin TERM=xterm-256color JAX_PLATFORMS=cpu "
        f"MAXKERNEL_TUI_CACHE_DIR={suite_cache} MAXKERNEL_TUI_DATA_DIR={tmp_path / 'data'}"
    )
    command = f"{env} {sys.executable} -m maxkernel_tui.cli --task {task}; sleep 30"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", command], check=True
    )

    def keys(*pressed: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", "t", *pressed], check=True)

    try:
        wait_for_frame(tmux, "─ Source", "─ Tests")
        keys("F5")
        wait_for_frame(tmux, "proposes a plan", timeout=300)
        keys("a")
        wait_for_frame(tmux, "proposes a kernel", timeout=180)
        keys("r")
        wait_for_frame(tmux, "why?")
        keys("-l", "fuse the epilogue")
        keys("Enter")
        # the step's next proposal waits (the agent's words scroll by in the narrowed log)
        shown = wait_for_frame(tmux, "i1/implement.1: waiting for you", timeout=180)
        assert "proposes a kernel" in shown and "session ended" not in shown
        keys("Escape")
        wait_for_frame(tmux, "stopped by the engineer")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
