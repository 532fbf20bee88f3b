"""The session store: one SQLite file in WAL mode. Stdlib only; no jax, no Textual.

Every write is its own transaction (`BEGIN IMMEDIATE` ... `COMMIT`) and a method returns only
after its commit, so what the caller shows is already stored, and a process killed at any
moment leaves the file at the last commit: events numbered 1..n with no gap, resumed at n+1.
With `synchronous=NORMAL` a commit survives the death of the process; a power loss may take
the last few (SQLite's WAL trade-off). Other processes read committed data at any time; two
writing processes take turns (`busy_timeout`), and sequence numbers are assigned inside the
writer's transaction, so they never collide.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import astuple, replace
from pathlib import Path
from typing import Any

from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.store.best import Candidate, pick_best
from maxkernel_tui.store.kinds import (
    ACTIVE,
    EventKind,
    Mode,
    NodeStatus,
    SessionStatus,
    StoreError,
)
from maxkernel_tui.store.redact import redact, redact_text
from maxkernel_tui.store.rows import (
    SESSION_COLUMNS,
    BestKernel,
    Evaluation,
    Event,
    KernelVersion,
    LlmCall,
    Profile,
    SearchNode,
    Session,
    SessionSummary,
)
from maxkernel_tui.store.schema import SCHEMA_VERSION, current_version, migrate

BUSY_TIMEOUT_MS = 10_000


def _dumps(value: Mapping[str, Any]) -> str:
    if not isinstance(value, Mapping):
        raise TypeError(f"a payload is a mapping, not {type(value).__name__}")
    return json.dumps(redact(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class Store:
    """One connection per instance, used from any thread under a lock. Use `open_store` for
    the process's shared writer; open another `Store` on the same file to read elsewhere."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"{self.path}: cannot open the session store: {error}") from error
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(
                    f"{self.path}: cannot use write-ahead logging (journal mode {mode})"
                )
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self.schema_version = migrate(self._conn)
        except sqlite3.DatabaseError as error:
            self._conn.close()
            raise StoreError(f"{self.path}: not a usable session store: {error}") from error
        except StoreError as error:
            self._conn.close()
            raise StoreError(f"{self.path}: {error}") from None

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def integrity_check(self) -> list[str]:
        """["ok"] for a sound file, else SQLite's list of problems (and foreign key breaks)."""
        rows = [r[0] for r in self._read("PRAGMA integrity_check")]
        broken = self._read("PRAGMA foreign_key_check")
        return rows + [f"foreign key: {row}" for row in broken]

    # -- sessions ---------------------------------------------------------------------------

    def create_session(
        self, task_id: str, mode: Mode, title: str = "", status: SessionStatus = ACTIVE
    ) -> Session:
        now = time.time()
        session = Session.of_row(
            (uuid.uuid4().hex[:12], task_id, mode, status, redact_text(title), now, now)
        )
        with self._write() as conn:
            conn.execute(
                "INSERT INTO sessions (id, task_id, mode, created, updated, status, title) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session.id, task_id, mode, now, now, status, session.title),
            )
        return session

    def update_session(
        self,
        session_id: str,
        *,
        status: SessionStatus | None = None,
        mode: Mode | None = None,
        title: str | None = None,
    ) -> Session:
        with self._write() as conn:
            self._require_session(conn, session_id)
            for column, value in (
                ("status", status),
                ("mode", mode),
                ("title", None if title is None else redact_text(title)),
            ):
                if value is not None:
                    conn.execute(
                        f"UPDATE sessions SET {column} = ? WHERE id = ?", (value, session_id)
                    )
            self._touch(conn, session_id)
        return self.session(session_id)

    def session(self, session_id: str) -> Session:
        rows = self._read(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?",
            (session_id,),
        )
        if not rows:
            raise StoreError(f"no session {session_id!r}")
        return Session.of_row(rows[0])

    def find_session(self, prefix: str) -> Session:
        """The session whose id is or starts with `prefix` (a unique prefix, as git takes)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._read(
            "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY id", (escaped + "%",)
        )
        ids = [r[0] for r in rows]
        if prefix in ids:
            return self.session(prefix)
        if not ids:
            raise StoreError(f"no session {prefix!r} in {self.path}")
        if len(ids) > 1:
            raise StoreError(
                f"{prefix!r} names {len(ids)} sessions ({', '.join(ids[:5])}); give more of the id"
            )
        return self.session(ids[0])

    def list_sessions(self) -> list[SessionSummary]:
        """Every session, most recently updated first, with its kernel count and best kernel."""
        sessions = [
            Session.of_row(r)
            for r in self._read(
                f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY updated DESC, rowid DESC"
            )
        ]
        counts = dict(
            self._read("SELECT session_id, COUNT(*) FROM kernel_versions GROUP BY session_id")
        )
        usage = {
            r[0]: (r[1], r[2])
            for r in self._read(
                "SELECT session_id, SUM(prompt_tokens + completion_tokens), SUM(cost) FROM "
                "llm_calls GROUP BY session_id"
            )
        }
        summaries = []
        for session in sessions:
            best = self.best_kernel(session.id) if counts.get(session.id) else None
            tokens, cost = usage.get(session.id, (0, 0.0))
            summaries.append(
                SessionSummary(
                    session, counts.get(session.id, 0), best, int(tokens or 0), float(cost or 0.0)
                )
            )
        return summaries

    @staticmethod
    def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise StoreError(f"no session {session_id!r}")

    @staticmethod
    def _touch(conn: sqlite3.Connection, session_id: str) -> None:
        conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), session_id))

    # -- events -----------------------------------------------------------------------------

    def append_event(
        self, session_id: str, kind: EventKind, payload: Mapping[str, Any] | None = None
    ) -> Event:
        """Store an event and return it once committed: show only what this returns."""
        text = _dumps(payload or {})
        now = time.time()
        with self._write() as conn:
            self._require_session(conn, session_id)
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO events (session_id, seq, kind, payload, time) VALUES (?, ?, ?, ?, ?)",
                (session_id, seq, kind, text, now),
            )
            self._touch(conn, session_id)
        return Event(session_id, seq, kind, json.loads(text), now)

    def events(self, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """The session's events with seq > after_seq, in order (resume with the last seq seen)."""
        rows = self._read(
            "SELECT session_id, seq, kind, payload, time FROM events "
            "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, -1 if limit is None else limit),
        )
        return [Event.of_row(row) for row in rows]

    def last_seq(self, session_id: str) -> int:
        return int(
            self._read(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (session_id,)
            )[0][0]
        )

    # -- kernel versions, evaluations, profiles ----------------------------------------------

    def add_kernel_version(
        self, session_id: str, source: str, plan: str = "", parent_id: int | None = None
    ) -> KernelVersion:
        source, plan, now = redact_text(source), redact_text(plan), time.time()
        with self._write() as conn:
            self._require_session(conn, session_id)
            if (
                parent_id is not None
                and conn.execute(
                    "SELECT 1 FROM kernel_versions WHERE id = ?", (parent_id,)
                ).fetchone()
                is None
            ):
                raise StoreError(f"no kernel version {parent_id} to be the parent")
            number = conn.execute(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM kernel_versions WHERE session_id = ?",
                (session_id,),
            ).fetchone()[0]
            cursor = conn.execute(
                "INSERT INTO kernel_versions (session_id, number, parent_id, source, plan, "
                "created) VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, number, parent_id, source, plan, now),
            )
            self._touch(conn, session_id)
        return KernelVersion(_row_id(cursor), session_id, number, parent_id, source, plan, now)

    _KERNEL_COLUMNS = "id, session_id, number, parent_id, source, plan, created"

    def kernel_version(self, version_id: int) -> KernelVersion:
        rows = self._read(
            f"SELECT {self._KERNEL_COLUMNS} FROM kernel_versions WHERE id = ?", (version_id,)
        )
        if not rows:
            raise StoreError(f"no kernel version {version_id}")
        return KernelVersion(*rows[0])

    def kernel_versions(self, session_id: str) -> list[KernelVersion]:
        return [
            KernelVersion(*r)
            for r in self._read(
                f"SELECT {self._KERNEL_COLUMNS} FROM kernel_versions WHERE session_id = ? ORDER "
                "BY number",
                (session_id,),
            )
        ]

    def holds_kernel(self, session_id: str, source: str) -> bool:
        """One of the session's versions is `source` (as stored: redacted)."""
        sql = "SELECT 1 FROM kernel_versions WHERE session_id = ? AND source = ? LIMIT 1"
        return bool(self._read(sql, (session_id, redact_text(source))))

    def record_evaluation(self, kernel_version_id: int, report: Mapping[str, Any]) -> Evaluation:
        """Store an evaluation report (`EvalReport.to_json()`); its verdict is kept as a column."""
        verdict = Verdict(report["verdict"])  # KeyError or ValueError: a report without one
        return Evaluation(
            *self._insert_for_version("evaluations", kernel_version_id, report, verdict=verdict)
        )

    def evaluations(self, kernel_version_id: int) -> list[Evaluation]:
        rows = self._read(
            "SELECT id, kernel_version_id, verdict, report, created FROM evaluations "
            "WHERE kernel_version_id = ? ORDER BY id",
            (kernel_version_id,),
        )
        return [Evaluation(i, k, Verdict(v), json.loads(r), c) for i, k, v, r, c in rows]

    def record_profile(self, kernel_version_id: int, profile: Mapping[str, Any]) -> Profile:
        return Profile(*self._insert_for_version("profiles", kernel_version_id, profile))

    def profiles(self, kernel_version_id: int) -> list[Profile]:
        rows = self._read(
            "SELECT id, kernel_version_id, profile, created FROM profiles "
            "WHERE kernel_version_id = ? ORDER BY id",
            (kernel_version_id,),
        )
        return [Profile(i, k, json.loads(p), c) for i, k, p, c in rows]

    def _insert_for_version(
        self, table: str, version_id: int, document: Mapping[str, Any], **columns: Any
    ) -> tuple[Any, ...]:
        text, now = _dumps(document), time.time()
        column = {"evaluations": "report", "profiles": "profile"}[table]
        names = ["kernel_version_id", *columns, column, "created"]
        values = (version_id, *columns.values(), text, now)
        with self._write() as conn:
            owner = conn.execute(
                "SELECT session_id FROM kernel_versions WHERE id = ?", (version_id,)
            ).fetchone()
            if owner is None:
                raise StoreError(f"no kernel version {version_id}")
            cursor = conn.execute(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                values,
            )
            self._touch(conn, owner[0])
        return (_row_id(cursor), version_id, *columns.values(), json.loads(text), now)

    def record_score(self, kernel_version_id: int, score: float, kind: str, also: str = "") -> None:
        """A profiled version's score, the fitness its session ranks kernels by (of `kind`: measured
        or estimated, against which XLA; `also`: the other speedup's words); recorded again, it
        replaces the last."""
        with self._write() as conn:
            owner = conn.execute(
                "SELECT session_id FROM kernel_versions WHERE id = ?", (kernel_version_id,)
            ).fetchone()
            if owner is None:
                raise StoreError(f"no kernel version {kernel_version_id}")
            conn.execute(
                "INSERT OR REPLACE INTO scores (kernel_version_id, score, kind, also, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (kernel_version_id, float(score), kind, also, time.time()),
            )
            self._touch(conn, owner[0])

    def best_kernel(self, session_id: str) -> BestKernel | None:
        """The session's best kernel, the one definition every screen and command shows
        (store/best.py says it); None when the session has no kernel yet."""
        rows = self._read(
            "SELECT k.id, s.score, s.kind, (SELECT e.verdict FROM evaluations e WHERE "
            "e.kernel_version_id = k.id ORDER BY e.id DESC LIMIT 1) FROM kernel_versions k "
            "LEFT JOIN scores s ON s.kernel_version_id = k.id WHERE k.session_id = ? "
            "ORDER BY k.number",
            (session_id,),
        )
        pick = pick_best([Candidate.of_row(row) for row in rows])
        if pick is None:
            return None
        latest = ([None, *self.evaluations(pick.version_id)])[-1]  # its latest evaluation, if any
        version = self.kernel_version(pick.version_id)
        also = self._read("SELECT also FROM scores WHERE kernel_version_id = ?", (version.id,))
        return BestKernel(version, latest, pick.rule, pick.score, pick.kind, *(a for (a,) in also))

    # -- LLM calls ----------------------------------------------------------------------------

    def record_llm_call(
        self,
        session_id: str,
        *,
        model: str,
        provider: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        latency_s: float,
        error: str | None = None,
    ) -> LlmCall:
        # The row as stored; its id comes from the insert.
        call = LlmCall(
            0,
            session_id,
            model,
            provider,
            int(prompt_tokens),
            int(completion_tokens),
            float(cost),
            float(latency_s),
            None if error is None else redact_text(error),
            time.time(),
        )
        with self._write() as conn:
            self._require_session(conn, session_id)
            cursor = conn.execute(
                "INSERT INTO llm_calls (session_id, model, provider, prompt_tokens, "
                "completion_tokens, cost, latency_s, error, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                astuple(call)[1:],
            )
            self._touch(conn, session_id)
        return replace(call, id=_row_id(cursor))

    def llm_calls(self, session_id: str) -> list[LlmCall]:
        return [
            LlmCall(*r)
            for r in self._read(
                "SELECT id, session_id, model, provider, prompt_tokens, completion_tokens, cost, "
                "latency_s, error, "
                "created FROM llm_calls WHERE session_id = ? ORDER BY id",
                (session_id,),
            )
        ]

    def usage(self, session_id: str) -> tuple[int, float]:
        """Tokens (prompt + completion) and dollars spent by the session's LLM calls so far."""
        tokens, cost = self._read(
            "SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0), COALESCE(SUM(cost), 0) "
            "FROM llm_calls WHERE session_id = ?",
            (session_id,),
        )[0]
        return int(tokens), float(cost)

    # -- search nodes -------------------------------------------------------------------------

    _NODE_COLUMNS = (
        "id, session_id, parent_id, kernel_version_id, strategy, status, score, data, created, "
        "updated"
    )

    def add_search_node(
        self,
        session_id: str,
        *,
        strategy: str,
        parent_id: int | None = None,
        kernel_version_id: int | None = None,
        status: NodeStatus = NodeStatus.PENDING,
        score: float | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> SearchNode:
        text, now = _dumps(data or {}), time.time()
        with self._write() as conn:
            self._require_session(conn, session_id)
            cursor = conn.execute(
                "INSERT INTO search_nodes (session_id, parent_id, kernel_version_id, strategy, "
                "status, score, data, "
                "created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, parent_id, kernel_version_id, strategy, status, score, text, now, now),
            )
            self._touch(conn, session_id)
        return SearchNode(
            _row_id(cursor),
            session_id,
            parent_id,
            kernel_version_id,
            strategy,
            status,
            score,
            json.loads(text),
            now,
            now,
        )

    def update_search_node(
        self,
        node_id: int,
        *,
        status: NodeStatus | None = None,
        score: float | None = None,
        kernel_version_id: int | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> SearchNode:
        """Change what is given; `data` replaces the node's data."""
        changes = {
            "status": status,
            "score": score,
            "kernel_version_id": kernel_version_id,
            "data": None if data is None else _dumps(data),
        }
        with self._write() as conn:
            owner = conn.execute(
                "SELECT session_id FROM search_nodes WHERE id = ?", (node_id,)
            ).fetchone()
            if owner is None:
                raise StoreError(f"no search node {node_id}")
            for column, value in changes.items():
                if value is not None:
                    conn.execute(
                        f"UPDATE search_nodes SET {column} = ? WHERE id = ?", (value, node_id)
                    )
            conn.execute("UPDATE search_nodes SET updated = ? WHERE id = ?", (time.time(), node_id))
            self._touch(conn, owner[0])
        return self.search_node(node_id)

    def search_node(self, node_id: int) -> SearchNode:
        rows = self._read(f"SELECT {self._NODE_COLUMNS} FROM search_nodes WHERE id = ?", (node_id,))
        if not rows:
            raise StoreError(f"no search node {node_id}")
        return self._node(rows[0])

    def search_nodes(self, session_id: str) -> list[SearchNode]:
        return [
            self._node(r)
            for r in self._read(
                f"SELECT {self._NODE_COLUMNS} FROM search_nodes WHERE session_id = ? ORDER BY id",
                (session_id,),
            )
        ]

    @staticmethod
    def _node(row: tuple[Any, ...]) -> SearchNode:
        node_id, session_id, parent_id, version_id, strategy, status, score, data, *times = row
        return SearchNode(
            node_id,
            session_id,
            parent_id,
            version_id,
            strategy,
            NodeStatus(status),
            score,
            json.loads(data),
            *times,
        )


def _row_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (always set after one)."""
    assert cursor.lastrowid is not None
    return cursor.lastrowid


_SHARED: dict[tuple[int, Path], Store] = {}
_SHARED_LOCK = threading.Lock()


def open_store(path: str | os.PathLike[str] | None = None) -> Store:
    """This process's writer for `path` (default: `default_store_path()`), opened once and shared
    by its threads. A forked child gets its own connection, never its parent's."""
    resolved = Path(path if path is not None else default_store_path()).resolve()
    key = (os.getpid(), resolved)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Store(resolved)
        return _SHARED[key]


def default_store_path() -> Path:
    """`sessions.db` in the data directory of the settings (MAXKERNEL_TUI_DATA_DIR, the config
    file's data_dir, else $XDG_DATA_HOME/maxkernel-tui or ~/.local/share/maxkernel-tui)."""
    from maxkernel_tui.config import load_settings

    return load_settings().store_path


def schema_of(path: str | os.PathLike[str]) -> int:
    """The schema version of an existing file without migrating it (0 when empty)."""
    conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return current_version(conn)
    finally:
        conn.close()


__all__ = ["SCHEMA_VERSION", "Store", "default_store_path", "open_store", "schema_of"]
