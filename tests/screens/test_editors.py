"""Editors with highlighting compile their language's query once, and are otherwise the editors
Textual's own constructors make."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.document._syntax_aware_document import SyntaxAwareDocument
from textual.widgets import TextArea

from maxkernel_tui.screens.editors import highlighted
from maxkernel_tui.screens.source_pane import SourcePane

KERNEL = """import jax
from jax.experimental import pallas as pl


def computation(x):  # the kernel
    return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
                          out_shape=x)(x)
"""
PLAN = "## Plan\n\n1. **rows** in blocks of `256`\n2. f32 accumulation\n"


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """Each compile of a highlight query, as it happens."""
    seen: list[str] = []
    prepare = SyntaxAwareDocument.prepare_query

    def counted(self, query):
        seen.append(query)
        return prepare(self, query)

    monkeypatch.setattr(SyntaxAwareDocument, "prepare_query", counted)
    return seen


def coloured(editor: TextArea) -> dict[int, set[tuple[int, int | None, str]]]:
    """Each line's highlighted spans (as a set: Textual's own order varies between two
    editors made alike)."""
    editor._build_highlight_map()
    return {line: set(spans) for line, spans in editor._highlights.items()}


@pytest.mark.parametrize(
    ("text", "language", "code", "options"),
    [
        (KERNEL, "python", True, {"read_only": True}),
        (KERNEL, "python", True, {"tab_behavior": "focus"}),
        (PLAN, "markdown", False, {}),
        (PLAN, "markdown", False, {"show_line_numbers": True, "read_only": True}),
    ],
)
def test_compiled_once_and_the_same_editor_as_textual_makes(
    compiles, text, language, code, options
):
    ours = highlighted(text, language, code=code, **options)
    assert len(compiles) == 1
    make = TextArea.code_editor if code else TextArea
    theirs = make(text, language=language, **options)
    assert ours.language == theirs.language == language
    assert type(ours.document) is type(theirs.document) is SyntaxAwareDocument
    assert coloured(ours) == coloured(theirs) and coloured(ours)
    for name in ("theme", "soft_wrap", "show_line_numbers", "tab_behavior", "read_only"):
        assert getattr(ours, name) == getattr(theirs, name), name


def test_no_language_gives_plain_text(compiles):
    editor = highlighted(KERNEL, None, read_only=True)
    assert editor.language is None and not compiles and editor.text == KERNEL


async def test_the_source_pane_compiles_python_once_and_highlights_it(compiles, tmp_path: Path):
    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield SourcePane(tmp_path / "kernel.py", KERNEL)

    app = One()
    async with app.run_test() as pilot:
        await pilot.pause()
        editor = app.query_one(SourcePane).editor
        assert editor.language == "python" and editor.text == KERNEL
        assert editor._highlights  # drawn coloured
    assert len(compiles) == 1
