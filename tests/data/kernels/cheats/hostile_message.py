"""Cheat category: terminal control sequences in an error message.

computation raises an exception whose message writes the clipboard (OSC 52), retitles the window,
clears the screen, moves the cursor (C1 CSI, a bare carriage return, backspaces) and reverses
the reading order (U+202E), hoping the report prints it raw to the engineer's terminal.

Expected: rejected by trace, with every control character shown as an escape
"""

HOSTILE = (
    "\x1b]52;c;cm0gLXJmIH4K\x07"
    "\x1b]0;owned\x07"
    "\x1b[2J"
    "\x9b31m"
    "safe\rfake\b\b\b\b"
    "\u202eevil"
)


def computation(x, scale, epsilon):
    raise ValueError(HOSTILE)
