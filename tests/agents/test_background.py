"""Blocking work awaited in a daemon thread: its result or error comes back to the awaiting
task, and a process that exits (or gives up waiting) does not wait for the thread."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from maxkernel_tui.agents.background import in_daemon_thread


async def test_the_result_comes_back_from_another_thread():
    assert await in_daemon_thread(
        lambda a, b: (a + b, threading.current_thread().daemon), 2, 3
    ) == (5, True)


async def test_an_error_is_raised_in_the_awaiting_task():
    def fails() -> None:
        raise ValueError("no such task")

    with pytest.raises(ValueError, match="no such task"):
        await in_daemon_thread(fails)


async def test_a_cancelled_await_drops_the_late_result():
    release = threading.Event()
    waiting = asyncio.ensure_future(in_daemon_thread(release.wait, 30))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()  # the thread ends now and finds nobody waiting: no error anywhere
    await asyncio.sleep(0.05)


def test_a_process_exits_without_waiting_for_the_thread():
    """What asyncio.to_thread does not give: the loop's executor threads are joined at exit."""
    program = textwrap.dedent(
        """
        import asyncio, time
        from maxkernel_tui.agents.background import in_daemon_thread

        async def main():
            try:
                await asyncio.wait_for(in_daemon_thread(time.sleep, 60), 0.2)
            except TimeoutError:
                print("gave up", flush=True)

        asyncio.run(main())
        """
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0 and done.stdout.strip() == "gave up", done.stderr
    assert time.monotonic() - began < 30  # the sleeping thread (60 s) was not waited for
