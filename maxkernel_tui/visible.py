"""Text from untrusted code, a model or a task file, made safe to show: every control character
is written as an escape a reader can see (`\\x1b`, `\\x9b`, `\\u202e`) instead of reaching the
terminal, where it could write the clipboard (OSC 52), retitle the window, clear the screen,
move the cursor (a bare carriage return, backspaces) or reorder what is read (bidi overrides).
Line breaks and tabs are kept. Plain Python: the CLI, the screens and `kernels/` import it.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

# C0 but tab and line feed, DEL, C1; the invisible marks and overrides that reorder a line
# (bidi controls, line and paragraph separators, the byte-order mark); lone surrogates (bytes
# that were not UTF-8), which a terminal's encoder would refuse.
_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029"
    "\u2066-\u2069\ufeff\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with each control character shown as its escape; a CRLF line end is a line end."""
    return _CONTROLS.sub(_escape, text.replace("\r\n", "\n"))


class VisibleStream(io.TextIOBase):
    """A text stream that writes everything through `visible`: what the CLI prints."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.terminal = stream  # the stream itself, for the program's own sequences

    def write(self, text: str) -> int:
        self.terminal.write(visible(text))
        return len(text)

    def flush(self) -> None:
        self.terminal.flush()

    def isatty(self) -> bool:
        return self.terminal.isatty()

    def fileno(self) -> int:
        return self.terminal.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.terminal.encoding


def terminal(stream: TextIO) -> TextIO:
    """Where the program's own control sequences go (a status line redrawn in place): the
    stream under a `VisibleStream`."""
    return stream.terminal if isinstance(stream, VisibleStream) else stream


@contextmanager
def visible_output() -> Iterator[None]:
    """Standard output and error through `visible` for as long as it lasts."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = VisibleStream(sys.stdout), VisibleStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved
