"""Wait on a condition, never for a fixed time: in a thread (processes, files, tmux) or on the
event loop of a Textual app under test (its workers and timers keep running while we wait)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], timeout: float = 60.0, interval: float = 0.2, what: str = ""
) -> T:
    """The first truthy value of `condition()`, polled until `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met in {timeout:.0f} s{': ' + what if what else ''}")


async def until(
    pilot: Any,
    condition: Callable[[], T],
    timeout: float = 120.0,
    interval: float = 0.05,
    describe: Callable[[], str] | None = None,
) -> T:
    """Let the app behind `pilot` run until `condition()` is truthy; `describe()` says what the
    screen showed when it was not."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if value := condition():
            return value
        await pilot.pause(interval)
    shown = f"; {describe()}" if describe is not None else ""
    raise AssertionError(f"condition not met in {timeout:.0f} s{shown}")


def pane_text(tmux: list[str]) -> str:
    """What the tmux session "t" on the server `tmux` (["tmux", "-L", socket]) shows now."""
    captured = subprocess.run(
        [*tmux, "capture-pane", "-p", "-t", "t"], check=False, capture_output=True, text=True
    )
    return captured.stdout


def wait_for_frame(tmux: list[str], *needles: str, timeout: float = 60.0) -> str:
    """The first capture of the tmux session "t" holding every one of `needles`. A terminal is
    written in pieces, so a capture can land mid-frame: wait for one frame with all of them
    rather than assert on the first capture with one. A miss shows the last capture."""
    last = [""]

    def whole() -> str | None:
        last[0] = pane_text(tmux)
        return last[0] if all(needle in last[0] for needle in needles) else None

    try:
        return wait_for(whole, timeout)
    except AssertionError:
        raise AssertionError(f"no frame with all of {needles}; last screen:\n{last[0]}") from None


async def eventually(
    condition: Callable[[], T], timeout: float = 60.0, interval: float = 0.05, what: str = ""
) -> T:
    """`wait_for` on a running event loop: its tasks keep running while we wait."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if value := condition():
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met in {timeout:.0f} s{': ' + what if what else ''}")
