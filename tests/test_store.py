"""The session store: API, migrations, redaction, concurrency, and SIGKILL at random moments."""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.store import (
    MIGRATIONS,
    REDACTED,
    SCHEMA_VERSION,
    BestRule,
    Store,
    StoreError,
    is_secret_name,
    open_store,
    redact,
    schema_of,
)
from maxkernel_tui.store.kinds import NodeStatus, SessionStatus
from maxkernel_tui.store.schema import migrate

REPORT_OK = {
    "task": "12p_RMSNorm",
    "verdict": "accepted",
    "targets": ["v5e"],
    "device": "cpu",
    "checks": [{"name": "static", "status": "pass", "detail": "ok", "seconds": 0.1, "data": {}}],
    "timings": [],
    "seeds": [0, 1, 2],
}
REPORT_BAD = {
    **REPORT_OK,
    "verdict": "rejected",
    "checks": [
        {"name": "trace", "status": "fail", "detail": "no pallas_call", "seconds": 0.2, "data": {}}
    ],
}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "sessions.db") as opened:
        yield opened


def test_a_session_and_its_events(store):
    session = store.create_session("12p_RMSNorm", "hitl", title="rmsnorm try")
    first = store.append_event(session.id, "step_started", {"step": "plan"})
    second = store.append_event(session.id, "proposal", {"text": "blocks of 256", "n": [1, 2]})
    assert (first.seq, second.seq) == (1, 2)
    assert second.payload == {"text": "blocks of 256", "n": [1, 2]}
    assert [e.seq for e in store.events(session.id)] == [1, 2]
    assert [e.kind for e in store.events(session.id, after_seq=1)] == ["proposal"]
    assert store.events(session.id, limit=1)[0].seq == 1
    assert store.session(session.id).updated >= first.time
    other = store.create_session("8p_GEMM", "auto")
    assert store.append_event(other.id, "x", {}).seq == 1  # numbering is per session
    assert store.find_session(session.id[:6]).id == session.id
    assert store.update_session(session.id, status="done", mode="auto").status == "done"
    with pytest.raises(StoreError, match="no session"):
        store.append_event("nope", "x", {})


def test_events_are_append_only_and_json(store):
    session = store.create_session("t", "hitl")
    store.append_event(session.id, "a", {"i": 1})
    with pytest.raises(TypeError):
        store.append_event(session.id, "b", {"bad": object()})
    with pytest.raises(ValueError):
        store.append_event(session.id, "b", {"nan": float("nan")})
    assert store.last_seq(session.id) == 1  # nothing half-written
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store._conn.execute("UPDATE events SET kind = 'z'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store._conn.execute("DELETE FROM events")


def test_kernel_versions_evaluations_and_the_best_kernel(store):
    session = store.create_session("12p_RMSNorm", "auto")
    assert store.best_kernel(session.id) is None
    v1 = store.add_kernel_version(session.id, "def computation(x): ...", plan="1. rows")
    v2 = store.add_kernel_version(session.id, "def computation(x): return x", parent_id=v1.id)
    assert (v1.number, v2.number, v2.parent_id) == (1, 2, v1.id)
    found = store.best_kernel(session.id)  # nothing evaluated: the latest
    assert (found.version, found.evaluation, found.rule) == (v2, None, BestRule.NOTHING_ACCEPTED)
    store.record_evaluation(v2.id, REPORT_BAD)
    found = store.best_kernel(session.id)
    assert found.version == v2 and found.evaluation.verdict == "rejected" and not found.accepted
    accepted = store.record_evaluation(v1.id, REPORT_OK)
    v3 = store.add_kernel_version(session.id, "def computation(x): return 2 * x", parent_id=v1.id)
    store.record_evaluation(v3.id, REPORT_BAD)
    found = store.best_kernel(session.id)  # the latest accepted wins over later versions
    assert (found.version, found.evaluation, found.rule) == (
        v1,
        accepted,
        BestRule.LATEST_ACCEPTED,
    )
    assert store.evaluations(v1.id)[0].report == REPORT_OK
    profile = store.record_profile(v1.id, {"vmem_bytes": 1 << 20, "kind": "estimated"})
    assert store.profiles(v1.id) == [profile]
    with pytest.raises(StoreError):
        store.add_kernel_version(session.id, "x", parent_id=999)
    with pytest.raises(StoreError):
        store.record_evaluation(999, REPORT_OK)
    [summary] = store.list_sessions()
    assert (summary.kernel_versions, summary.best_version, summary.best_verdict) == (
        3,
        1,
        "accepted",
    )


def test_llm_calls_and_search_nodes(store):
    session = store.create_session("8p_GEMM", "graph")
    store.record_llm_call(
        session.id,
        model="gemini-2.5-pro",
        provider="gemini",
        prompt_tokens=1000,
        completion_tokens=200,
        cost=0.01,
        latency_s=1.5,
    )
    failed = store.record_llm_call(
        session.id,
        model="m",
        provider="openai",
        prompt_tokens=10,
        completion_tokens=0,
        cost=0.0,
        latency_s=0.1,
        error="HTTP 429 for key sk-abcdefghijklmnopqrstuvwx",
    )
    assert failed.error == f"HTTP 429 for key {REDACTED}"
    assert store.usage(session.id) == (1210, 0.01)
    assert [c.provider for c in store.llm_calls(session.id)] == ["gemini", "openai"]
    version = store.add_kernel_version(session.id, "src")
    root = store.add_search_node(session.id, strategy="beam", kernel_version_id=version.id)
    child = store.add_search_node(
        session.id, strategy="beam", parent_id=root.id, data={"tile": [512, 1024]}
    )
    updated = store.update_search_node(
        child.id, status=NodeStatus.ACCEPTED, score=1.42, data={"speedup": 1.42}
    )
    assert (updated.status, updated.score, updated.data, updated.parent_id) == (
        NodeStatus.ACCEPTED,
        1.42,
        {"speedup": 1.42},
        root.id,
    )
    assert [n.id for n in store.search_nodes(session.id)] == [root.id, child.id]
    assert store.list_sessions()[0].tokens == 1210


def test_vocabularies_are_read_back_as_their_enums_and_stored_as_their_words(store):
    session = store.create_session("8p_GEMM", "graph")
    version = store.add_kernel_version(session.id, "src")
    written = store.record_evaluation(version.id, REPORT_OK)
    node = store.add_search_node(session.id, strategy="beam", status=NodeStatus.RUNNING)
    [evaluation] = store.evaluations(version.id)
    [read] = store.search_nodes(session.id)
    assert type(written.verdict) is type(evaluation.verdict) is Verdict
    assert evaluation == written and evaluation.verdict is Verdict.ACCEPTED
    assert (
        type(node.status) is type(read.status) is NodeStatus and read.status is NodeStatus.RUNNING
    )
    assert type(store.session(session.id).status) is SessionStatus
    raw = store._conn.execute(
        "SELECT e.verdict, n.status, typeof(e.verdict), typeof(n.status) FROM evaluations e, "
        "search_nodes n"
    ).fetchall()
    assert raw == [("accepted", "running", "text", "text")]  # the words, as before the enums
    with pytest.raises(ValueError, match="not a valid Verdict"):
        store.record_evaluation(version.id, {"verdict": "unknown"})


GOOGLE_KEY = "AIzaSyA1234567890abcdefghijklmnopqrstuv"
OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
LOCAL_KEY = "local-server-key-98765"


def test_credentials_never_reach_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", LOCAL_KEY)
    path = tmp_path / "sessions.db"
    with Store(path) as store:
        session = store.create_session("t", "hitl", title=f"debug {GOOGLE_KEY}")
        event = store.append_event(
            session.id,
            "llm_request",
            {
                "api_key": "abc",
                "headers": {
                    "Authorization": "Bearer abcdefghijklmnopqrstuvwxyz",
                    "x-goog-api-key": "q",
                },
                "config": {"accessToken": "t0k", "password": "hunter2", "client_secret": ["a"]},
                "usage": {"prompt_tokens": 10, "max_tokens": 100, "total_tokens": 110},
                "api_key_set": True,
                "note": f"used {OPENAI_KEY} and {LOCAL_KEY}",
                "key_count": 3,
                "text": "an ordinary message",
                "error": f"401: invalid header Authorization: Bearer {OPENAI_KEY}",
            },
        )
        p = event.payload
        assert (
            p["api_key"]
            == p["headers"]["Authorization"]
            == p["headers"]["x-goog-api-key"]
            == REDACTED
        )
        assert p["config"] == {
            "accessToken": REDACTED,
            "password": REDACTED,
            "client_secret": REDACTED,
        }
        assert p["usage"] == {"prompt_tokens": 10, "max_tokens": 100, "total_tokens": 110}
        assert (
            p["api_key_set"] is True and p["key_count"] == 3 and p["text"] == "an ordinary message"
        )
        assert p["note"] == f"used {REDACTED} and {REDACTED}"
        assert OPENAI_KEY not in p["error"]
        version = store.add_kernel_version(
            session.id, f"# {GOOGLE_KEY}\ndef computation(x): return x"
        )
        store.record_evaluation(
            version.id, {"verdict": "rejected", "detail": f"env had {LOCAL_KEY}"}
        )
        assert store.events(session.id)[0].payload == p  # what was returned is what is stored
    raw = b"".join(f.read_bytes() for f in tmp_path.iterdir())
    for secret in (GOOGLE_KEY, OPENAI_KEY, LOCAL_KEY, "hunter2", "abcdefghijklmnopqrstuvwxyz"):
        assert secret.encode() not in raw


def test_secret_names():
    for name in (
        "api_key",
        "apiKey",
        "GEMINI_API_KEY",
        "x-goog-api-key",
        "token",
        "access_token",
        "password",
        "client_secret",
        "Authorization",
        "credentials",
        "key",
    ):
        assert is_secret_name(name), name
    for name in (
        "prompt_tokens",
        "max_tokens",
        "tokens",
        "tokenizer",
        "keyboard",
        "monkey_count",
        "kind",
        "seq",
    ):
        assert not is_secret_name(name), name
    assert redact({"ghp": "ghp_" + "a" * 36, "list": ["xoxb-1234567890-abc", 3]}) == {
        "ghp": REDACTED,
        "list": [REDACTED, 3],
    }
    # a plain `key` with a short value is a key press or a label; a long one may be a credential
    assert redact(
        {"key": "a", "sort_key": "name", "cache_key": "0123456789abcdef", "token": "t"}
    ) == {"key": "a", "sort_key": "name", "cache_key": REDACTED, "token": REDACTED}


def test_a_version_1_file_migrates(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=1) == 1
    conn.execute("INSERT INTO sessions VALUES ('abc', '12p_RMSNorm', 'hitl', 1.0, 2.0, 'active')")
    conn.execute("INSERT INTO events VALUES ('abc', 1, 'started', '{\"a\": 1}', 1.5)")
    conn.close()
    assert schema_of(path) == 1
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS) >= 2
        assert store.session("abc").title == ""
        assert store.events("abc")[0].payload == {"a": 1}
        assert store.append_event("abc", "resumed", {}).seq == 2
        assert store.add_search_node("abc", strategy="beam").id == 1
    assert schema_of(path) == SCHEMA_VERSION
    with Store(path) as store:  # opening again applies nothing
        assert store._read("SELECT COUNT(*) FROM schema_version")[0][0] == SCHEMA_VERSION


def test_a_failed_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=1)
    conn.close()
    monkeypatch.setattr(
        "maxkernel_tui.store.schema.MIGRATIONS", [MIGRATIONS[0], MIGRATIONS[1] + ["NOT SQL"]]
    )
    with pytest.raises(StoreError, match="not a usable session store"):
        Store(path)
    assert schema_of(path) == 1
    conn = sqlite3.connect(path)
    assert "title" not in [r[1] for r in conn.execute("PRAGMA table_info(sessions)")]
    conn.close()


def test_newer_and_foreign_files_are_refused(tmp_path):
    newer = tmp_path / "newer.db"
    Store(newer).close()
    conn = sqlite3.connect(newer)
    conn.execute("INSERT INTO schema_version VALUES (?, 0)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this maxkernel-tui knows"):
        Store(newer)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable session store"):
        Store(junk)


def test_one_writer_per_process(tmp_path):
    path = tmp_path / "sessions.db"
    assert open_store(path) is open_store(str(path))
    assert open_store(path).path == path.resolve()


# A writer process: appends events (payloads of random size, each naming its writer and count),
# a kernel version every 5th event and an LLM call every 7th, until killed or `limit` reached.
# A tiny page cache makes SQLite spill a transaction's pages into the WAL before its commit, so
# some kills also leave a torn, uncommitted tail in the WAL for the reopen to discard.
WRITER = r"""
import random, sys
from maxkernel_tui.store import Store
path, session, name, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = Store(path)
store._conn.execute("PRAGMA cache_size = 4")
versions = store.kernel_versions(session)
parent = versions[-1].id if versions else None
rng = random.Random(name)
i = 0
while limit <= 0 or i < limit:
    i += 1
    blob = "x" * rng.randrange(0, 40000)
    store.append_event(session, "tick", {"writer": name, "i": i, "len": len(blob), "blob": blob})
    if i % 5 == 0:
        source = f"# {name} {i}\n" + blob[:2000]
        parent = store.add_kernel_version(session, source, plan=name, parent_id=parent).id
    if i % 7 == 0:
        store.record_llm_call(session, model="m", provider="replay", prompt_tokens=i,
                              completion_tokens=1, cost=0.0, latency_s=0.0)
"""


def _writer(path, session, name, limit=0):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), session, name, str(limit)])


def _check_consistent(store, session_id):
    """Events 1..n without gap or duplicate, payloads whole, each writer's events contiguous
    (nothing lost before a later one), kernel versions numbered 1..m with existing parents."""
    assert store.integrity_check() == ["ok"]
    events = store.events(session_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    per_writer = {}
    for event in events:
        if event.kind == "tick":
            assert len(event.payload["blob"]) == event.payload["len"]
            per_writer.setdefault(event.payload["writer"], []).append(event.payload["i"])
    for name, counts in per_writer.items():
        assert counts == list(range(1, len(counts) + 1)), name
    versions = store.kernel_versions(session_id)
    assert [v.number for v in versions] == list(range(1, len(versions) + 1))
    ids = {v.id for v in versions}
    assert all(v.parent_id is None or v.parent_id in ids for v in versions)
    return events


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    path = tmp_path / "sessions.db"
    with Store(path) as setup:
        session_id = setup.create_session("12p_RMSNorm", "auto").id
    reader = sqlite3.connect(path)  # another process's view: committed rows only
    total = 0
    for run in range(5):
        threshold = total + rng.randrange(20, 400)
        writer = _writer(path, session_id, f"run{run}")
        deadline = time.monotonic() + 30
        while reader.execute("SELECT COUNT(*) FROM events").fetchone()[0] < threshold:
            assert writer.poll() is None, f"writer died (seed {seed})"
            assert time.monotonic() < deadline, f"writer too slow (seed {seed})"
            time.sleep(0.002)
        time.sleep(
            rng.uniform(0, 0.01)
        )  # a random phase of the writer's loop, not just after a commit
        os.kill(writer.pid, signal.SIGKILL)
        assert writer.wait() == -signal.SIGKILL
        with Store(path) as store:
            events = _check_consistent(store, session_id)
            assert len(events) >= threshold, f"seed {seed}"
            resumed = store.append_event(session_id, "resumed", {"run": run})
            assert resumed.seq == len(events) + 1
            total = resumed.seq
    reader.close()


def test_two_writing_processes_take_turns(tmp_path):
    path = tmp_path / "sessions.db"
    with Store(path) as store:
        session_id = store.create_session("t", "graph").id
    writers = [_writer(path, session_id, name, limit=150) for name in ("a", "b")]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    with Store(path) as store:
        events = _check_consistent(store, session_id)
        assert len(events) == 300
        assert len(store.kernel_versions(session_id)) == 60


def test_the_store_and_settings_use_the_standard_library_only():
    import ast
    import pathlib

    package = pathlib.Path(__file__).resolve().parents[1] / "maxkernel_tui"
    # the report's leaf, the codec and the config names are stdlib only too: the store may use them
    report = [
        *(package / "kernels" / "report").glob("*.py"),
        package / "codec.py",
        package / "kernels" / "config_names.py",
    ]
    for path in [*(package / "store").glob("*.py"), package / "config.py", *report]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            for name in names:
                assert (
                    name.split(".")[0] in sys.stdlib_module_names
                    or name == "__future__"
                    or name.startswith(
                        (
                            "maxkernel_tui.store",
                            "maxkernel_tui.config",
                            "maxkernel_tui.codec",
                            "maxkernel_tui.kernels.config_names",
                            "maxkernel_tui.kernels.report",
                        )
                    )
                ), f"{path.name}: {name}"


def test_steering_is_kept_in_order_redacted_and_read_by_another_connection(tmp_path) -> None:
    from maxkernel_tui.store.kinds import EventKind, SteerAction
    from maxkernel_tui.store.steering import add_steering, steering, taken_up

    path = tmp_path / "s.db"
    with Store(path) as writer, Store(path) as reader:
        session = writer.create_session("12p", "graph")
        first = add_steering(
            writer, session.id, SteerAction.IDEA, {"node": "n0", "text": f"use {GOOGLE_KEY}"}
        )
        add_steering(reader, session.id, SteerAction.PIN, {"node": "n0"})  # any process may
        rows = steering(reader, session.id)
        assert [(r.id, r.action) for r in rows] == [(first.id, "idea"), (first.id + 1, "pin")]
        assert rows[0].payload == {"node": "n0", "text": f"use {REDACTED}"}
        assert [r.id for r in steering(writer, session.id, after_id=first.id)] == [first.id + 1]
        writer.append_event(
            session.id, EventKind.STEERED, {"ref": "steer/1", "steer_id": first.id, "round": 2}
        )
        assert taken_up(reader, session.id) == {first.id: 2}
        with pytest.raises(StoreError, match="no session"):
            add_steering(writer, "nope", SteerAction.PIN, {"node": "n0"})
