"""Text an attacker puts where the tool shows it (a kernel's error, a model's answer, a task
file): terminal control sequences and Rich markup, and the check that none of it stays live."""

from __future__ import annotations

import re

# a clipboard write (OSC 52), a window title, a screen clear, C1 CSI, a bare carriage return,
# backspaces, a right-to-left override, and Rich markup that would bold or link
HOSTILE = (
    "\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;owned\x07\x1b[2J\x9b31msafe\rfake\b\b\b\b\u202eevil"
    " [bold]loud[/bold] [link=https://evil.example]click[/link]"
)
# C0 but tab and line feed, DEL, C1, the bidi overrides and isolates
_LIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def live_controls(text: str) -> list[str]:
    """The control characters in `text` a terminal would act on."""
    return _LIVE.findall(text)
