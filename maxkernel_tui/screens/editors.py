"""Text editors with syntax highlighting, made with one compile of their language's highlight
query. No jax here.

Textual's `TextArea` compiles the query twice when the language is given to its constructor: its
`__init__` builds the document for the language, then setting the `language` reactive builds it
again. For Python that is 50 ms each, paid before the workbench's first frame
(benchmarks/first_frame.py). Made as plain text and then given the language, it is compiled once.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import TextArea


def highlighted(text: str, language: str | None, *, code: bool = False, **kwargs: Any) -> TextArea:
    """A `TextArea` (`code`: `TextArea.code_editor`) on `text` highlighted as `language`; the
    other arguments are the constructor's."""
    make = TextArea.code_editor if code else TextArea
    editor = make(text, language=None, **kwargs)
    editor.language = language
    return editor
