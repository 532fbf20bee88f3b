"""The session's event log: persist, then deliver; and the memory that makes resume cheap.

Events whose ref is already in the store (a resumed session replaying its steps) are neither
written nor delivered again. `recall` gives the stored event for a ref, so that a replayed step
reuses a paid model answer, a decision, an evaluation or a profile instead of redoing it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from maxkernel_tui.agents.orchestration.events import SessionEvent, decode
from maxkernel_tui.store.db import Store

Listener = Callable[[SessionEvent], None]
E = TypeVar("E", bound=SessionEvent)


class Journal:
    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self._listeners: list[Listener] = []
        self._by_key: dict[str, SessionEvent] = {}
        for row in store.events(session_id):
            event = decode(row.kind, row.payload)
            self._by_key[event.ref] = event

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Deliver every new event to `listener` (after it is stored); returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def emit(self, event: E) -> E:
        """Store and deliver `event`; on replay, the stored one (not delivered again)."""
        stored = self._by_key.get(event.ref)
        if stored is not None:
            return stored  # type: ignore[return-value]  # same key, same kind: the step is deterministic
        self.store.append_event(self.session_id, event.kind, event.payload())
        self._by_key[event.ref] = event
        for listener in list(self._listeners):
            listener(event)
        return event

    def recall(self, key: str, kind: type[E]) -> E | None:
        event = self._by_key.get(key)
        return event if isinstance(event, kind) else None

    def history(self) -> list[SessionEvent]:
        """Every stored event of the session, in order (for a UI that opens a running session)."""
        return [decode(row.kind, row.payload) for row in self.store.events(self.session_id)]
