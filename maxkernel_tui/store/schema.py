"""The store's schema as numbered migrations, applied in one transaction when a file opens.

A migration is a list of SQL statements; `schema_version` holds one row per applied migration.
Never edit a released migration: add the next one. A file written by a newer release (a
version above `SCHEMA_VERSION`) is refused rather than guessed at.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from maxkernel_tui.store.kinds import StoreError

if TYPE_CHECKING:  # the connection comes from store.db, which imports sqlite3
    import sqlite3

# Version 1: sessions, the append-only event log, kernel versions, evaluations, LLM calls.
_V1 = [
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        mode TEXT NOT NULL,
        created REAL NOT NULL,
        updated REAL NOT NULL,
        status TEXT NOT NULL)""",
    """CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL CHECK (seq >= 1),
        kind TEXT NOT NULL,
        payload TEXT NOT NULL CHECK (json_valid(payload)),
        time REAL NOT NULL,
        PRIMARY KEY (session_id, seq))""",
    """CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
    """CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
    """CREATE TABLE kernel_versions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        number INTEGER NOT NULL,
        parent_id INTEGER REFERENCES kernel_versions(id),
        source TEXT NOT NULL,
        plan TEXT NOT NULL,
        created REAL NOT NULL,
        UNIQUE (session_id, number))""",
    """CREATE TABLE evaluations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kernel_version_id INTEGER NOT NULL REFERENCES kernel_versions(id),
        verdict TEXT NOT NULL,
        report TEXT NOT NULL CHECK (json_valid(report)),
        created REAL NOT NULL)""",
    "CREATE INDEX evaluations_by_version ON evaluations (kernel_version_id)",
    """CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        model TEXT NOT NULL,
        provider TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cost REAL NOT NULL,
        latency_s REAL NOT NULL,
        error TEXT,
        created REAL NOT NULL)""",
    "CREATE INDEX llm_calls_by_session ON llm_calls (session_id)",
]

# Version 2: session titles, profiles, search nodes.
_V2 = [
    "ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX sessions_by_updated ON sessions (updated)",
    """CREATE TABLE profiles (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kernel_version_id INTEGER NOT NULL REFERENCES kernel_versions(id),
        profile TEXT NOT NULL CHECK (json_valid(profile)),
        created REAL NOT NULL)""",
    "CREATE INDEX profiles_by_version ON profiles (kernel_version_id)",
    """CREATE TABLE search_nodes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        parent_id INTEGER REFERENCES search_nodes(id),
        kernel_version_id INTEGER REFERENCES kernel_versions(id),
        strategy TEXT NOT NULL,
        status TEXT NOT NULL,
        score REAL,
        data TEXT NOT NULL CHECK (json_valid(data)),
        created REAL NOT NULL,
        updated REAL NOT NULL)""",
    "CREATE INDEX search_nodes_by_session ON search_nodes (session_id)",
]

# Version 3: each profiled kernel version's score, the fitness its session ranks kernels by (one
# kind per session, e.g. "estimated speedup vs XLA on v5e"), so that every screen and command
# picks the best kernel from the store by the same rule (Store.best_kernel). Scores a session
# stored before this version are in its log: the `profile` events' own fields, copied once.
_V3 = [
    """CREATE TABLE scores (
        kernel_version_id INTEGER PRIMARY KEY REFERENCES kernel_versions(id),
        score REAL NOT NULL,
        kind TEXT NOT NULL,
        created REAL NOT NULL)""",
    """INSERT OR REPLACE INTO scores (kernel_version_id, score, kind, created)
        SELECT json_extract(e.payload, '$.version_id'), json_extract(e.payload, '$.score'),
            json_extract(e.payload, '$.score_kind'), e.time
        FROM events e JOIN kernel_versions k ON k.id = json_extract(e.payload, '$.version_id')
        WHERE e.kind = 'profile' AND json_extract(e.payload, '$.score') IS NOT NULL
        ORDER BY e.session_id, e.seq""",
]

# Version 4: the engineer's steering of a graph search (an idea or a strategy at a node, a node
# expanded next, pinned, a hand-made child, the score's TPU generation, a comparison), one row
# per action, written by whichever process steers (the search's own, a CLI, another TUI) and read
# by the running search at its next round: a kill -9 loses none of it.
_V4 = [
    """CREATE TABLE steering (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        action TEXT NOT NULL,
        payload TEXT NOT NULL CHECK (json_valid(payload)),
        created REAL NOT NULL)""",
    "CREATE INDEX steering_by_session ON steering (session_id, id)",
]

# Version 5: beside a score, the other speedup over XLA it does not rank by, labelled (a
# speedup is over XLA as the reference is written or at the precision the task's tolerance needs:
# kernels/perf/vs_xla.py). Scores stored before this version have none: ''.
_V5 = ["ALTER TABLE scores ADD COLUMN also TEXT NOT NULL DEFAULT ''"]

MIGRATIONS: list[list[str]] = [_V1, _V2, _V3, _V4, _V5]
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: sqlite3.Connection) -> int:
    """0 for an empty file."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if not exists:
        return 0
    return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the file up to `target` in one transaction (all of it or none); the new version.

    `conn` must be in autocommit mode (isolation_level=None) so the transaction is ours."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied REAL "
            "NOT NULL)"
        )
        version = current_version(conn)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store has schema version {version}, newer than this maxkernel-tui knows "
                f"({SCHEMA_VERSION}); upgrade maxkernel-tui"
            )
        for number in range(version + 1, target + 1):
            for statement in MIGRATIONS[number - 1]:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, applied) VALUES (?, ?)", (number, time.time())
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return max(version, target)
