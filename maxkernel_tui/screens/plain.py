"""Text that came from a kernel, a model or a task file, for a widget: shown as written, never
read as Rich markup (`[link=...]`, `[bold]`), with its control characters made visible. Widgets
that read a `str` as markup (DataTable cells, Tree labels, notifications) take this instead."""

from __future__ import annotations

from rich.text import Text

from maxkernel_tui.visible import visible


def plain(text: str, style: str = "") -> Text:
    return Text(visible(text), style=style)
