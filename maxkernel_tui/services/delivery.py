"""The one route from what the agents do to a screen: updates collected from any thread (the
engine, the gate, a search's journal) and delivered in order, in batches, on the event loop, at
most every DRAW_INTERVAL_S, so that a fast model stream never redraws per token. The workbench's
session and the search screen's feed both deliver through it. No Textual, no jax."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

DRAW_INTERVAL_S = 0.1  # what a session did is delivered at most this often

Update = TypeVar("Update")
# (updates in order, whether the producer has ended)
Deliver = Callable[[Sequence[Update], bool], None]


class BatchedDelivery(Generic[Update]):
    """Collects updates from any thread; delivers them to `deliver` on `loop`, batched.
    `ended()` says whether the producer has finished (told with the batch that follows).
    Until a receiver is attached (`deliver` None) updates wait."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Deliver[Update] | None = None,
        ended: Callable[[], bool] = lambda: False,
    ) -> None:
        self._loop, self._deliver, self.ended = loop, deliver, ended
        self._undelivered: list[Update] = []
        self._armed = False  # a delivery is scheduled
        self._lock = threading.Lock()

    def attach(self, deliver: Deliver[Update]) -> None:
        """The receiver, from now on; what waited is delivered with the next batch."""
        self._deliver = deliver
        self.schedule()

    def collect(self, update: Update) -> None:
        """Called by the producer, possibly from another thread."""
        with self._lock:
            self._undelivered.append(update)
        self.schedule()

    def schedule(self) -> None:
        """A delivery within DRAW_INTERVAL_S (one at a time)."""
        with self._lock:
            if self._armed:
                return
            self._armed = True
        self._loop.call_soon_threadsafe(self._loop.call_later, DRAW_INTERVAL_S, self._run)

    @property
    def settled(self) -> bool:
        """Everything collected so far has been delivered."""
        return not self._undelivered and not self._armed

    def drain(self) -> list[Update]:
        """What is not delivered yet, taken now (to draw it before the engineer's stop)."""
        with self._lock:
            updates, self._undelivered = self._undelivered, []
        return updates

    def _run(self) -> None:
        with self._lock:
            self._armed = False
        if self._deliver is None:
            return
        updates = self.drain()
        ended = self.ended()
        if updates or ended:
            self._deliver(updates, ended)
