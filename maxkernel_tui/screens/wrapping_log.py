"""A log of text lines that wraps each line at the widget's edge instead of cutting it, keeps the
most recent lines whole (for reading back), and shows streamed text as it comes: the Tests and
Agents panes' logs. No jax here.

Finished lines go to a `RichLog`, which renders each once at the width of the time; when the
width changes (a proposal opens beside the log, the terminal is resized) they are drawn again
at the new one. Streamed text whose line has not ended yet is shown below the log, wrapped,
until its line ends; only then does it join the log, so a line is never split by the pieces it
streamed in.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Resize
from textual.widgets import RichLog, Static

from maxkernel_tui.visible import visible

OPEN_ROWS = 4  # rows the unfinished streamed line may take; its newest words are shown


class WrappingLog(Vertical):
    DEFAULT_CSS = f"""
    WrappingLog {{
        height: 1fr;
    }}
    WrappingLog > RichLog {{
        height: 1fr;
    }}
    WrappingLog > .open-line {{
        height: auto;
        max-height: {OPEN_ROWS};
    }}
    """

    def __init__(self, max_lines: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._open = ""  # streamed text whose line has not ended
        self._width: int | None = None  # the width the log's lines were drawn at
        # Made here, not found by a query: a line may be written before they are mounted (a
        # pane's on_mount can run first), and a RichLog draws what it was given once sized.
        # min_width 1: wrap at the widget's edge, however narrow, instead of cutting the line.
        self._log = RichLog(max_lines=max_lines, wrap=True, min_width=1)
        self._open_line = Static(classes="open-line", markup=False)
        self._open_line.display = False

    def compose(self) -> ComposeResult:
        yield self._log
        yield self._open_line

    @property
    def lines(self) -> list[str]:
        """The lines written, each whole (they are shown wrapped), and the unfinished one."""
        return list(self._lines) + ([self._open] if self._open else [])

    @property
    def open_text(self) -> str:
        """Streamed text whose line has not ended yet."""
        return self._open

    def write_line(self, line: str) -> None:
        """A line of its own, after any unfinished streamed line (which ends there)."""
        if self._open:
            self._finish(self._open)
            self._open = ""
        self._finish(line)
        self._show_open()

    def stream(self, text: str) -> None:
        """Text as it streams: each line it ends joins the log, the rest is shown until it ends."""
        *ended, self._open = (self._open + text).split("\n")
        for line in ended:
            self._finish(line)
        self._show_open()

    def _finish(self, line: str) -> None:
        line = visible(line)  # what kernels and models wrote: no control character is drawn
        self._lines.append(line)
        self._log.write(Text(line))

    def on_resize(self, event: Resize) -> None:
        if self._width is not None and event.size.width != self._width:
            log = self._log.clear()
            for line in self._lines:
                log.write(Text(line), scroll_end=False)
            log.scroll_end(animate=False, immediate=False)
        self._width = event.size.width
        self._show_open()

    def _show_open(self) -> None:
        shown = self._open_line
        shown.display = bool(self._open)
        room = OPEN_ROWS * self.size.width  # 0 until laid out: then it is shown whole
        tail = "…" + self._open[-(room - 1) :] if 0 < room < len(self._open) else self._open
        shown.update(Text(visible(tail)))
