"""`maxkernel-tui sessions` and `export` on a store filled by the test."""

import json

import pytest

from maxkernel_tui.store import Store

ACCEPTED_REPORT = {
    "task": "12p_RMSNorm",
    "kernel": "kernel.py",
    "targets": ["v5e"],
    "device": "cpu (TPU interpret mode)",
    "verdict": "accepted",
    "seeds": [11, 12, 13],
    "timings": [],
    "checks": [
        {
            "name": "static",
            "status": "pass",
            "detail": "parses; defines computation",
            "seconds": 0.1,
            "data": {},
        },
        {
            "name": "numerics",
            "status": "pass",
            "detail": "max |Δ| 3.1e-3 | 3 seeds",
            "seconds": 2.0,
            "data": {},
        },
        {
            "name": "timing",
            "status": "skip",
            "detail": "not measured: no TPU",
            "seconds": 0.0,
            "data": {},
        },
    ],
}
REJECTED_REPORT = {
    **ACCEPTED_REPORT,
    "verdict": "rejected",
    "checks": [
        {
            "name": "trace",
            "status": "fail",
            "detail": "no pallas_call in the jaxpr",
            "seconds": 0.3,
            "data": {},
        }
    ],
}


@pytest.fixture
def filled(tmp_path):
    with Store(tmp_path / "data" / "sessions.db") as store:
        good = store.create_session("12p_RMSNorm", "hitl", title="rmsnorm")
        v1 = store.add_kernel_version(
            good.id, "def computation(x, scale, eps):\n    return x\n", plan="1. rows of 256"
        )
        store.record_evaluation(v1.id, ACCEPTED_REPORT)
        v2 = store.add_kernel_version(
            good.id, "def computation(x, scale, eps):\n    return 2 * x\n", parent_id=v1.id
        )
        store.record_evaluation(v2.id, REJECTED_REPORT)
        store.record_llm_call(
            good.id,
            model="gemini-2.5-pro",
            provider="gemini",
            prompt_tokens=40000,
            completion_tokens=1203,
            cost=0.38,
            latency_s=3.0,
        )
        store.update_session(good.id, status="done")
        draft = store.create_session("8p_GEMM", "auto")
        first = store.add_kernel_version(draft.id, "def computation(a, b):\n    return a @ b\n")
        store.add_kernel_version(
            draft.id, "def computation(a, b):\n    return (a @ b).T.T", parent_id=first.id
        )
        empty = store.create_session("1p_Flash_Attention", "graph")
    return good, draft, empty


def test_sessions_json_and_text(run_cli, filled):
    good, draft, empty = filled
    listing = json.loads(run_cli("sessions", "--json").stdout)
    rows = {row["id"]: row for row in listing["sessions"]}
    assert [row["id"] for row in listing["sessions"]] == [
        empty.id,
        draft.id,
        good.id,
    ]  # most recent first
    assert rows[good.id] | {"created": None, "updated": None} == {
        "id": good.id,
        "task_id": "12p_RMSNorm",
        "mode": "hitl",
        "status": "done",
        "title": "rmsnorm",
        "kernel_versions": 2,
        "best_version": 1,
        "best_verdict": "accepted",
        "best_rule": "latest_accepted",
        "best_score": None,
        "best_score_kind": None,
        "best_score_also": None,
        "tokens": 41203,
        "cost": 0.38,
        "created": None,
        "updated": None,
    }
    assert rows[good.id]["updated"].endswith("Z")
    assert (rows[draft.id]["best_version"], rows[draft.id]["best_verdict"]) == (2, None)
    assert rows[empty.id]["kernel_versions"] == 0
    text = run_cli("sessions").stdout.splitlines()
    assert text[0].split() == [
        "ID",
        "TASK",
        "MODE",
        "STATUS",
        "VERSIONS",
        "BEST",
        "TOKENS",
        "COST",
        "UPDATED",
    ]
    line = next(line for line in text if line.startswith(good.id))
    assert "12p_RMSNorm" in line and "41,203" in line and "$0.38" in line
    assert "v1 accepted (latest accepted, none scored)" in line
    draft_line = next(line for line in text if line.startswith(draft.id))
    assert "v2 not evaluated (latest, none accepted)" in draft_line


def test_sessions_without_a_store_creates_nothing(run_cli, tmp_path):
    assert run_cli("sessions").stdout.startswith("no sessions yet (store: ")
    assert not (tmp_path / "data").exists()


def test_export_the_accepted_kernel(run_cli, filled, tmp_path):
    good, _, _ = filled
    out = tmp_path / "out"
    done = run_cli("export", good.id[:5], "--out", str(out))
    assert done.stdout.split() == [
        str(out / name)
        for name in (
            "12p_RMSNorm.py",
            "12p_RMSNorm.md",
            "12p_RMSNorm.card.md",
            "12p_RMSNorm.card.json",
        )
    ]
    source = (out / "12p_RMSNorm.py").read_text()
    assert source.startswith(
        f"# 12p_RMSNorm: kernel v1 of maxkernel-tui session {good.id} (accepted)."
    )
    assert source.endswith("def computation(x, scale, eps):\n    return x\n")
    compile(source, "kernel.py", "exec")
    report = (out / "12p_RMSNorm.md").read_text()
    assert report.startswith("# 12p_RMSNorm: kernel v1\n")
    assert f"| session | `{good.id}` (hitl, done) — rmsnorm |" in report
    assert (
        "**ACCEPTED**" in report and "v1, the latest accepted version (none has a score)" in report
    )
    assert "| numerics | ✓ pass | max \\|Δ\\| 3.1e-3 \\| 3 seeds | 2.0 |" in report
    assert "| timing | – skip | not measured: no TPU | 0.0 |" in report
    assert "## Plan\n\n1. rows of 256" in report
    assert "maxkernel-tui eval 12p_RMSNorm.py --task 12p_RMSNorm" in report
    # the evidence card beside it: the checks, nothing measured, the session's cost
    card = (out / "12p_RMSNorm.card.md").read_text()
    assert card.startswith(f"## Evidence card: kernel v1 of session {good.id}\n")
    assert "✓ numerics" in card and "nothing measured: no TPU timed this kernel" in card
    assert f"41,203 tokens · $0.3800 (the whole session {good.id})" in card
    assert "not computed yet (v4, v5e, v5p, v6e, tpu7x" in card
    data = json.loads((out / "12p_RMSNorm.card.json").read_text())
    assert data["subject"] == "kernel version" and data["tokens"] == 41203
    assert data["verdict"].startswith("verdict: ACCEPTED") and data["portability"] == []


def test_export_without_an_accepted_evaluation_takes_the_latest(run_cli, filled, tmp_path):
    _, draft, empty = filled
    run_cli("export", draft.id, "--out", str(tmp_path / "out"))
    assert (tmp_path / "out" / "8p_GEMM.py").read_text().endswith("return (a @ b).T.T\n")
    report = (tmp_path / "out" / "8p_GEMM.md").read_text()
    assert "v2, no version accepted: the latest version" in report
    assert "Not evaluated." in report and "from v1" in report
    done = run_cli("export", empty.id, "--out", str(tmp_path / "none"), expect=2)
    assert f"session {empty.id} has no kernel yet" in done.stderr
    done = run_cli("export", "zzz", "--out", str(tmp_path / "none"), expect=2)
    assert "no session 'zzz'" in done.stderr


def test_export_without_a_store(run_cli, tmp_path):
    done = run_cli("export", "abc", "--out", str(tmp_path / "out"), expect=2)
    assert "no session store at" in done.stderr


def test_export_without_arguments_writes_the_latest_session_and_names_it(run_cli, tmp_path):
    with Store(tmp_path / "data" / "sessions.db") as store:
        older = store.create_session("8p_GEMM", "auto")
        store.add_kernel_version(older.id, "def computation(a, b):\n    return a @ b\n")
        latest = store.create_session("12p_RMSNorm", "hitl")
        v1 = store.add_kernel_version(latest.id, "def computation(x, scale, eps):\n    return x\n")
        store.record_evaluation(v1.id, ACCEPTED_REPORT)
    done = run_cli("export")
    out = tmp_path / "data" / "exports" / latest.id
    assert done.stdout.split() == [
        str(out / name)
        for name in (
            "12p_RMSNorm.py",
            "12p_RMSNorm.md",
            "12p_RMSNorm.card.md",
            "12p_RMSNorm.card.json",
        )
    ]
    assert f"session {latest.id} (12p_RMSNorm, hitl, active): the most recently updated" in (
        done.stderr
    )
    done = run_cli("export", older.id[:6])  # named: no word about which, the default folder
    assert done.stdout.split()[0] == str(tmp_path / "data" / "exports" / older.id / "8p_GEMM.py")
    assert "most recently updated" not in done.stderr


def test_export_without_arguments_and_without_sessions(run_cli, tmp_path):
    Store(tmp_path / "data" / "sessions.db").close()
    done = run_cli("export", expect=2)
    assert "no sessions yet in" in done.stderr


def test_hostile_text_in_a_session_is_inert_in_the_listing_and_the_export(run_cli, tmp_path):
    """A model's plan, a kernel's error and a task's title with terminal controls: `sessions`
    prints them, and the exported report holds them, as escapes; the kernel file is the kernel."""
    from tests.support.hostile_text import HOSTILE, live_controls

    failed = {**REJECTED_REPORT, "checks": [{**REJECTED_REPORT["checks"][0], "detail": HOSTILE}]}
    failed["device"] = "numerics on the CPU in TPU interpret mode; compile with libtpu (AOT)"
    with Store(tmp_path / "data" / "sessions.db") as store:
        session = store.create_session("12p_RMSNorm", "hitl", title=HOSTILE)
        version = store.add_kernel_version(
            session.id, "def computation(x):\n    return x\n", plan=HOSTILE
        )
        store.record_evaluation(version.id, failed)
    listing = run_cli("sessions")
    assert live_controls(listing.stdout + listing.stderr) == []
    out = tmp_path / "out"
    exported = run_cli("export", session.id, "--out", str(out))
    assert live_controls(exported.stdout + exported.stderr) == []
    report = (out / "12p_RMSNorm.md").read_text()
    assert live_controls(report) == []
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07" in report
    assert "numerics on numerics" not in report  # the device says what ran where
    assert "; numerics on the CPU in TPU interpret mode; compile with libtpu (AOT);" in report
