"""How large a source file the tool accepts: a candidate kernel, a model's answer, a task file.

A kernel is a few hundred lines (the largest of our suite's references and the built-in agent's
kernels are under 400); a file hundreds of times that is not one, and parsing it would take
minutes (two million `x = 1` lines: ~40 s for `ast.parse` alone on this machine, as long again for
the static rules). Such input is refused at once, before anything parses it. No jax here.
"""

from __future__ import annotations

from pathlib import Path

MAX_SOURCE_BYTES = 512 * 1024  # 512 KiB: about 10,000 lines of kernel code


def _size_words(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 1024:.0f} KiB"


def oversize_problem(size: int, what: str) -> str | None:
    """A sentence naming the size and the limit when `size` bytes of `what` are too many."""
    if size <= MAX_SOURCE_BYTES:
        return None
    return (
        f"{what} is {_size_words(size)} ({size:,} bytes), over the limit of "
        f"{_size_words(MAX_SOURCE_BYTES)} for a source file: a kernel is a few hundred lines"
    )


def text_oversize_problem(text: str, what: str) -> str | None:
    """`oversize_problem` of a text, measured in UTF-8 bytes (cheaply: a character is ≤ 4)."""
    if len(text) * 4 <= MAX_SOURCE_BYTES:
        return None
    return oversize_problem(len(text.encode("utf-8")), what)


def file_oversize_problem(path: Path, what: str) -> str | None:
    """`oversize_problem` of a file, from its size on disk (nothing is read)."""
    try:
        size = path.stat().st_size
    except OSError:
        return None  # the caller's read reports a missing or unreadable file in its own words
    return oversize_problem(size, what)
