"""The steering log of a graph search: each action the engineer gave it, in order, as the
`steering` table keeps it. Any process may add to it (the search's own screen, a CLI, a TUI
following the search from elsewhere); the running search reads what is new at each round.
Stdlib only; redacted on its way in, like every payload of the store."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import EventKind, SteerAction
from maxkernel_tui.store.redact import redact
from maxkernel_tui.store.rows import SteeringRow


def add_steering(
    store: Store, session_id: str, action: SteerAction, payload: Mapping[str, Any]
) -> SteeringRow:
    """Store one steering action of the search `session_id` (committed before it returns)."""
    text, now = json.dumps(redact(dict(payload)), sort_keys=True), time.time()
    with store._write() as conn:
        store._require_session(conn, session_id)
        cursor = conn.execute(
            "INSERT INTO steering (session_id, action, payload, created) VALUES (?, ?, ?, ?)",
            (session_id, str(action), text, now),
        )
        store._touch(conn, session_id)
    assert cursor.lastrowid is not None
    return SteeringRow(cursor.lastrowid, session_id, action, json.loads(text), now)


def taken_up(store: Store, session_id: str) -> dict[int, int | None]:
    """Steering row id -> the round the search took it up at (None: not for a round), from the
    search's `steered` events."""
    rows = store._read(
        "SELECT json_extract(payload, '$.steer_id'), json_extract(payload, '$.round') "
        "FROM events WHERE session_id = ? AND kind = ?",
        (session_id, str(EventKind.STEERED)),
    )
    return {int(steer_id): round_ for steer_id, round_ in rows}


def steering(store: Store, session_id: str, after_id: int = 0) -> list[SteeringRow]:
    """The search's steering actions after row `after_id`, oldest first."""
    rows = store._read(
        "SELECT id, session_id, action, payload, created FROM steering "
        "WHERE session_id = ? AND id > ? ORDER BY id",
        (session_id, after_id),
    )
    return [
        SteeringRow(row_id, session, SteerAction(action), json.loads(payload), created)
        for row_id, session, action, payload, created in rows
    ]
