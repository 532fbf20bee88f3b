"""Blocking work awaited from the event loop in a daemon thread, for work that waits on a worker
process (describing a task, the built-in agent's drafting). No jax, no Textual here.

`asyncio.to_thread` runs in the loop's default executor, whose threads the process joins when it
exits: with the built-in agent drafting in one, ctrl+q 5 s after F5 on a cold 36k folder took
110 s (measured). A daemon thread is not joined; the worker processes it waits on end with the
process that started them (worker_main's parent guard).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def in_daemon_thread(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` in a daemon thread, awaited. Cancelling the await leaves the thread to
    finish on its own (its result is dropped), as `asyncio.to_thread` does."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile: nobody waits for the result
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]  # T when there is no error

    def run() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = function(*args)
        except BaseException as raised:  # handed to the awaiting task, raised there
            error = raised
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop has closed: the process is exiting
            return

    threading.Thread(target=run, name=getattr(function, "__name__", "work"), daemon=True).start()
    return await future
