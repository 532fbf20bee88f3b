"""One definition of a session's best kernel (`Store.best_kernel`: the best score among its
accepted versions, else the latest accepted, else the latest), and every surface that names one
names the same: `sessions` (CLI and screen), `export` (CLI and the sessions screen's `e`),
`--resume`, the workbench when a session ends, the search screen, the engine's own best. The
session's best is neither its first accepted version nor its last, and its log's end names
another (as a release before this one wrote it): none of those may be shown."""

from __future__ import annotations

import json
import sqlite3

from textual.widgets import DataTable, Static, TextArea

from maxkernel_tui.agents.orchestration.ending import best_at_end
from maxkernel_tui.agents.orchestration.events import ProfileDone, SessionEnded
from maxkernel_tui.app import MaxKernelApp
from maxkernel_tui.config import load_settings
from maxkernel_tui.screens.search import SearchScreen
from maxkernel_tui.screens.sessions import SessionsScreen
from maxkernel_tui.screens.workbench import WorkbenchScreen
from maxkernel_tui.services.search_feed import SearchFeed
from maxkernel_tui.store import BestRule, Store
from maxkernel_tui.store.schema import migrate
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import Bench, accepted, rejected, rmsnorm_task
from tests.support.waiting import until

ESTIMATED = "estimated speedup vs XLA on v5e"
ALSO = "1.02x XLA@3-pass (tolerance) (est., v5e)"
ACCEPTED, REJECTED = accepted().to_json(), rejected().to_json()
# (source, verdict, score): v2 is the best; v1 the first accepted, v3 the latest accepted
VERSIONS = [
    ("def computation(x, scale, epsilon):\n    return x  # v1\n", ACCEPTED, 1.2),
    ("def computation(x, scale, epsilon):\n    return x  # v2\n", ACCEPTED, 1.9),
    ("def computation(x, scale, epsilon):\n    return x  # v3\n", ACCEPTED, 1.4),
    ("def computation(x, scale, epsilon):\n    return x  # v4\n", REJECTED, None),
    ("def computation(x, scale, epsilon):\n    return x  # v5\n", ACCEPTED, None),
]
BEST = VERSIONS[1][0]


def scored_session(store: Store, mode: str = "auto") -> str:
    """A session as the engine leaves it: versions, verdicts, profiles with their scores in the
    log, and an end that names v1 (the first accepted)."""
    session = store.create_session("12p_RMSNorm", mode)
    ids = []
    for n, (source, report, score) in enumerate(VERSIONS, 1):
        version = store.add_kernel_version(session.id, source)
        ids.append(version.id)
        store.record_evaluation(version.id, report)
        if score is not None:
            event = ProfileDone(f"i{n}/profile", f"i{n}", version.id, score, ESTIMATED, None)
            store.append_event(session.id, event.kind, event.payload())
            store.record_score(version.id, score, ESTIMATED)
    ended = SessionEnded("end/5", "max iterations (5)", ids[0], 1.2, ESTIMATED, 1)
    store.append_event(session.id, ended.kind, ended.payload())
    store.update_session(session.id, status="done")
    return session.id


def test_the_store_picks_the_best_score_and_says_so(tmp_path) -> None:
    with Store(tmp_path / "s.db") as store:
        session_id = scored_session(store)
        best = store.best_kernel(session_id)
        assert best is not None and best.version.source == BEST
        assert (best.rule, best.score, best.score_kind) == (BestRule.BEST_SCORE, 1.9, ESTIMATED)
        assert best.words() == f"v2, the best score among its accepted versions: 1.9 ({ESTIMATED})"
        # the engine goes on from it, and a session's end names it
        engine = Bench(store, tmp_path / "sessions").engine(RoleProvider({}), session_id=session_id)
        assert engine.best is not None and (engine.best.number, engine.best.score) == (2, 1.9)
        ended = best_at_end(store, session_id)
        assert ended is not None and ended.version is not None and ended.version.number == 2
        assert "v2, the best score" in ended.words()


def test_a_store_written_before_scores_had_a_table_ranks_by_its_logged_scores(tmp_path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=2)  # the schema of the release before
    conn.close()
    with Store(path) as store:  # now at the current schema: fill it, then forget the scores
        session_id = scored_session(store)
        store._conn.execute("DELETE FROM scores")
        store._conn.execute("DELETE FROM schema_version WHERE version >= 3")
        store._conn.execute("DROP TABLE scores")
        store._conn.execute("DROP TABLE steering")  # version 4's, migrated again after 3
    with Store(path) as store:  # migrated again: the scores come back from the log
        best = store.best_kernel(session_id)
        assert best is not None and best.version.number == 2 and best.rule == BestRule.BEST_SCORE


def test_every_command_names_the_same_best_kernel(run_cli, tmp_path) -> None:
    with Store(tmp_path / "data" / "sessions.db") as store:
        session_id = scored_session(store)
        best = store.best_kernel(session_id)  # profiled again: the other speedup beside it
        store.record_score(best.version.id, 1.9, ESTIMATED, ALSO)
    [row] = json.loads(run_cli("sessions", "--json").stdout)["sessions"]
    assert (row["best_version"], row["best_rule"], row["best_score"]) == (2, "best_score", 1.9)
    assert (row["best_score_kind"], row["best_score_also"]) == (ESTIMATED, ALSO)
    line = next(x for x in run_cli("sessions").stdout.splitlines() if x.startswith(session_id))
    assert "v2 accepted (best score 1.9)" in line
    run_cli("export", session_id, "--out", str(tmp_path / "out"))
    kernel = (tmp_path / "out" / "12p_RMSNorm.py").read_text()
    assert kernel.startswith(f"# 12p_RMSNorm: kernel v2 of maxkernel-tui session {session_id}")
    assert kernel.endswith(BEST)
    report = (tmp_path / "out" / "12p_RMSNorm.md").read_text()
    chosen = f"v2, the best score among its accepted versions: 1.9 ({ESTIMATED}; {ALSO})"
    assert f"| chosen as | {chosen} |" in report


def make_app(tmp_path, **kwargs) -> MaxKernelApp:
    settings = load_settings(
        env={
            "MAXKERNEL_TUI_DATA_DIR": str(tmp_path / "data"),
            "MAXKERNEL_TUI_CONFIG": str(tmp_path / "none.toml"),
        }
    )
    return MaxKernelApp(cache=tmp_path / "cache", settings=settings, **kwargs)


async def test_every_screen_names_the_same_best_kernel(tmp_path) -> None:
    store_path = tmp_path / "data" / "sessions.db"
    with Store(store_path) as store:
        session_id = scored_session(store)
        search_id = scored_session(store, mode="graph")
    app = make_app(tmp_path)
    async with app.run_test(size=(200, 48)) as pilot:
        search = SearchScreen(rmsnorm_task(), SearchFeed(store_path, search_id))
        await app.push_screen(search)
        counters = search.query_one("#counters", Static)
        await until(pilot, lambda: "─ best kernel v2, the best score" in str(counters.content))
        await pilot.press("escape")
        await pilot.press("s")
        assert isinstance(app.screen, SessionsScreen)
        table = app.screen.query_one("#sessions", DataTable)
        cells = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert {row[5] for row in cells} == {"v2 accepted (best score 1.9)"}
        await pilot.press("e")  # exports the session under the cursor (the latest: the search)
        exported = tmp_path / "data" / "exports" / search_id / "12p_RMSNorm.py"
        await until(pilot, exported.is_file)
        assert exported.read_text().endswith(BEST)
        await pilot.press("down", "enter")  # resumes the other one
        await until(pilot, lambda: isinstance(app.screen, WorkbenchScreen))
        assert app.screen.session.session_id == session_id
        await until(pilot, lambda: app.screen.query_one("#source", TextArea).text == BEST)
        await until(pilot, lambda: app.screen.source.version == 2)
