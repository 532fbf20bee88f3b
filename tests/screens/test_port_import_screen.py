"""The picker's import flow with GPU sources: a CUDA file with the built-in provider gets its plain
"cannot port" message in the form; a Triton file whose PyTorch module runs the kernel goes to the
porter (a real google-genai client against the fake Gemini server), whose reference is shown
beside the source for the engineer (torch is absent here, so no comparison decides): rejecting
writes nothing, approving writes the task and opens it in the workbench."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static, TextArea

from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.porting.torch_compare import torch_available
from maxkernel_tui.screens.port_review import PortReviewScreen
from maxkernel_tui.screens.task_import import TaskImportScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from tests.fakes.role_gemini import RoleGemini, ServedInThread
from tests.support.llm import GEMINI_KEY
from tests.support.paths import TESTS
from tests.support.porter_answers import porter_answer, softmax_reference
from tests.support.waiting import until

SIZE = (160, 48)
PORTING = TESTS / "data" / "porting"
TRITON = PORTING / "triton_layer.py"  # its module runs the Triton kernel
REFERENCE = softmax_reference(512, 256)
ANSWER = porter_answer(REFERENCE, "A row-wise softmax.")

needs_review = pytest.mark.skipif(
    torch_available(), reason="with torch the file's PyTorch harness decides, not the engineer"
)


def _app(tmp_path: Path, settings: Settings) -> MaxKernelApp:
    return MaxKernelApp(cache=tmp_path / "cache", settings=settings)


def _gemini(tmp_path: Path, url: str) -> Settings:
    return Settings(provider="gemini", model="gemini-test", base_url=url, data_dir=tmp_path)


async def _import(pilot, app: MaxKernelApp, file: Path, out: Path) -> None:
    await pilot.press("n")
    await until(pilot, lambda: isinstance(app.screen, TaskImportScreen))
    app.screen.query_one("#file", Input).value = str(file)
    app.screen.query_one("#out", Input).value = str(out)
    await pilot.pause()
    await pilot.click("#import")


def _message(app: MaxKernelApp) -> str:
    """The import form's message ('' while another screen is in front)."""
    if not isinstance(app.screen, TaskImportScreen):
        return ""
    return str(app.screen.query_one("#message", Static).content)


async def test_a_cuda_file_with_the_builtin_provider_gets_the_cannot_port_message(tmp_path):
    app = _app(tmp_path, Settings(data_dir=tmp_path))  # the default provider: builtin
    async with app.run_test(size=SIZE) as pilot:
        await _import(pilot, app, PORTING / "vector_add.cu", tmp_path / "out")
        await until(pilot, lambda: "error:" in _message(app), describe=lambda: _message(app))
        assert "the built-in offline agent cannot port CUDA or Triton code" in _message(app)
        assert app.screen.query_one("#file", Input).value == str(PORTING / "vector_add.cu")
    assert not (tmp_path / "out").exists()


async def _reviewed(pilot, app: MaxKernelApp) -> PortReviewScreen:
    def panes() -> list[TextArea] | None:
        shown = isinstance(app.screen, PortReviewScreen) and list(app.screen.query(TextArea))
        return shown or None

    source, reference = await until(
        pilot, panes, describe=lambda: f"{type(app.screen).__name__} in front: {_message(app)}"
    )
    screen = app.screen
    assert isinstance(screen, PortReviewScreen)
    assert source.text == TRITON.read_text() and reference.text == REFERENCE
    assert source.read_only and reference.read_only
    left, right = (
        screen.query_one("#source-pane").region,
        screen.query_one("#reference-pane").region,
    )
    assert left.right <= right.x and left.y == right.y  # side by side, source first
    assert "not compared with PyTorch" in str(screen.query_one("#reason", Static).content)
    return screen


@needs_review
async def test_a_rejected_port_writes_nothing_and_says_so_in_the_form(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    with ServedInThread(RoleGemini({"porter": [ANSWER]})) as server:
        app = _app(tmp_path, _gemini(tmp_path, server.url))
        async with app.run_test(size=SIZE) as pilot:
            await _import(pilot, app, TRITON, tmp_path / "softmax")
            await _reviewed(pilot, app)
            await pilot.press("r")
            await until(pilot, lambda: "error:" in _message(app), describe=lambda: _message(app))
            assert "not approved; nothing written" in _message(app)
    assert server.roles == ["porter"]
    assert not (tmp_path / "softmax").exists()


@needs_review
@pytest.mark.slow  # the approved reference is validated in a jax worker process
async def test_an_approved_port_is_written_and_opens_in_the_workbench(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    with ServedInThread(RoleGemini({"porter": [ANSWER]})) as server:
        app = _app(tmp_path, _gemini(tmp_path, server.url))
        async with app.run_test(size=SIZE) as pilot:
            await _import(pilot, app, TRITON, tmp_path / "softmax")
            await _reviewed(pilot, app)
            await pilot.press("a")
            await until(
                pilot,
                lambda: isinstance(app.screen, WorkbenchScreen),
                timeout=300,
                describe=lambda: _message(app),
            )
            task = app.screen.kernel_task
    assert task.task_id == "triton_layer" and task.configs == ("bench", "check", "heldout")
    assert task.folder == (tmp_path / "softmax").resolve()
    assert (task.folder / "source_module.py").read_text() == TRITON.read_text()
