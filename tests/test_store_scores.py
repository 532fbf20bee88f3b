"""A score in the store keeps, beside its value and kind, the other speedup over XLA it does not
rank by (schema 5); a version-4 file migrates with its scores kept and nothing beside them."""

import json
import sqlite3

from maxkernel_tui.store import SCHEMA_VERSION, Store, schema_of
from maxkernel_tui.store.schema import migrate

KIND = "estimated speedup vs XLA@3-pass (tolerance) on v5e"
ALSO = "0.35x XLA@1-pass (as written) (est., v5e)"
ACCEPTED = {"task": "41k", "verdict": "accepted", "checks": [], "timings": []}


def test_a_score_and_the_other_speedup_round_trip_to_the_best_kernel(tmp_path):
    with Store(tmp_path / "s.db") as store:
        session = store.create_session("41k", "auto")
        version = store.add_kernel_version(session.id, "def computation(x): return x")
        store.record_evaluation(version.id, ACCEPTED)
        store.record_score(version.id, 1.02, KIND, ALSO)
    with Store(tmp_path / "s.db") as store:  # read back by another process's open
        best = store.best_kernel(session.id)
    assert (best.score, best.score_kind, best.score_also) == (1.02, KIND, ALSO)
    assert best.score_words() == f"1.02 ({KIND}; {ALSO})"


def test_a_version_4_file_keeps_its_scores_with_nothing_beside_them(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=4) == 4
    conn.execute("INSERT INTO sessions VALUES ('abc', '41k', 'auto', 1.0, 2.0, 'done', '')")
    conn.execute("INSERT INTO kernel_versions VALUES (1, 'abc', 1, NULL, 'src', '', 1.0)")
    conn.execute(
        "INSERT INTO evaluations VALUES (1, 1, 'accepted', ?, 1.0)", (json.dumps(ACCEPTED),)
    )
    conn.execute("INSERT INTO scores VALUES (1, 0.349, 'estimated speedup vs XLA on v5e', 1.0)")
    conn.close()
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 5
        best = store.best_kernel("abc")
        assert (best.score, best.score_kind, best.score_also) == (
            0.349,
            "estimated speedup vs XLA on v5e",
            "",
        )
        assert best.score_words() == "0.349 (estimated speedup vs XLA on v5e)"
        store.record_score(1, 1.02, KIND, ALSO)  # a later profile writes both
        assert store.best_kernel("abc").score_also == ALSO
    assert schema_of(path) == SCHEMA_VERSION
