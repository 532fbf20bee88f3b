"""Events carry typed data (reports, profiles, the vocabularies' enums), converted once where the
store writes and reads them: every event written is read back equal; what earlier releases
stored (reports as dicts with plain strings, a failed profile's `{}` summary, a profile's text
inside its summary, the engine's errors with no role) is read back typed, and a session stored
so resumes without asking the model or the harness again."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from enum import Enum

import pytest

from maxkernel_tui.agents.orchestration import events as ev
from maxkernel_tui.agents.orchestration.gates import Action, Decider, Subject
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.report.status import Verdict
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import EventKind, Mode, NodeStatus, SteerAction
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import DIAGNOSIS, GOOD, Bench, accepted, kernel, plan, summary

NEW_EVENTS: list[ev.SessionEvent] = [
    ev.SessionStarted("s", "/t", "12p", Mode.HITL, "v5e", "builtin", "", {"max": 1}, {}),
    ev.StepStarted("a", "i1/plan", Role.PLANNER, 1, "planner (i1/plan)"),
    ev.ProposalMade("b", "i1/plan", Role.PLANNER, Subject.PLAN, "plan", "", "new plan"),
    ev.DecisionMade("c", "i1/plan", Action.HANDOFF, mode=Mode.AUTO, by=Decider.INTERACTIVE),
    ev.VersionCreated("c2", "i1/implement", 3, 1, Role.IMPLEMENTER),
    ev.EvaluationDone("d", "i1/test", 3, Verdict.ACCEPTED, None, accepted(), "local", "h", 2),
    ev.EarlierVerdict("e", "i2/test", 3, 2, Verdict.ACCEPTED, None, "i1/test", accepted()),
    ev.ProfileDone("f", "i1/profile", 3, 1.2, "estimated", summary(1.2), None, "Profile of"),
    ev.ProfileDone("g", "i1/profile", 4, None, "no profile", None, "it crashed"),
    ev.Intervention("h", "i2", Subject.MODE, "graph"),
    ev.ModeChanged("i", "i2", Mode.GRAPH),
    ev.ErrorRaised("j", "i2", Role.ENGINE, "boom"),
    ev.SearchNodeChanged("k", "n1", 1, NodeStatus.ACCEPTED, ["n0"], "grow", 1.1, "x", 4),
    ev.Steered("steer/1", 1, SteerAction.IDEA, "n3", 2, 'idea at #3: "wider K"'),
]


@pytest.mark.parametrize("event", NEW_EVENTS, ids=lambda e: e.ref)
def test_every_event_is_stored_as_json_and_read_back_equal_and_typed(tmp_path, event) -> None:
    with Store(tmp_path / "s.db") as store:
        session = store.create_session("12p", Mode.HITL)
        store.append_event(session.id, event.kind, event.payload())
        (back,) = Journal(store, session.id).history()
    json.dumps(event.payload())  # JSON alone: no dataclass or enum objects reach the store
    assert back == event
    for f in fields(back):  # the same types, not strings that compare equal
        assert type(getattr(back, f.name)) is type(getattr(event, f.name)), f.name


def test_each_event_class_has_its_own_kind_stored_as_its_text_and_read_back_typed(
    tmp_path,
) -> None:
    kinds = [cls.kind for cls in ev.SessionEvent.__subclasses__()]
    assert sorted(kinds) == sorted(EventKind) and set(ev.EVENT_TYPES) == set(EventKind)
    with Store(tmp_path / "s.db") as store:
        session = store.create_session("12p", Mode.HITL)
        event = ev.ModeChanged("m", "i1", Mode.AUTO)
        store.append_event(session.id, event.kind, event.payload())
        (row,) = store.events(session.id)
    assert row.kind is EventKind.MODE
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("SELECT kind FROM events").fetchall() == [("mode",)]


def test_a_kind_this_release_does_not_know_is_read_back_as_text_and_not_decoded(
    tmp_path,
) -> None:
    with Store(tmp_path / "s.db") as store:
        session = store.create_session("12p", Mode.HITL)
        store.append_event(session.id, "retired", {"ref": "r"})  # type: ignore[arg-type]
        (row,) = store.events(session.id)
    assert row.kind == "retired" and not isinstance(row.kind, EventKind)
    with pytest.raises(KeyError, match="no event of kind 'retired' in this release"):
        ev.decode(row.kind, row.payload)


def test_what_an_earlier_release_stored_is_read_back_typed(tmp_path) -> None:
    report = accepted().to_json()  # a report as it was stored: a dict of plain strings
    profile = summary(1.5).to_json()
    old = [
        (
            "step_started",
            {"ref": "a", "step": "i1", "role": "planner", "iteration": 1, "title": ""},
        ),
        (
            "evaluation",
            {"ref": "b", "step": "i1", "version_id": 1, "verdict": "accepted", "failure": None}
            | {"report": report, "executor_node": "local"},  # no hashes nor number yet
        ),
        (
            "profile",  # the text kept inside the summary, no text field
            {"ref": "c", "step": "i1", "version_id": 1, "score": 1.5, "score_kind": "est"}
            | {"summary": dict(profile, text="Profile of old"), "error": None},
        ),
        (
            "profile",  # a failed profile: an empty summary beside its error
            {"ref": "d", "step": "i2", "version_id": 2, "score": None, "score_kind": ""}
            | {"summary": {}, "error": "it crashed"},
        ),
        ("error", {"ref": "e", "step": "i2", "role": "", "message": "boom"}),
        ("decision", {"ref": "f", "step": "i2", "action": "handoff", "mode": "auto"}),
        ("decision", {"ref": "f2", "step": "i2", "action": "approve", "by": ""}),
        (
            "version",
            {"ref": "f3", "step": "i2", "version_id": 2, "number": 2} | {"origin": "debugger"},
        ),
        ("mode", {"ref": "g", "step": "i3", "mode": "auto", "retired_field": 1}),
    ]
    with Store(tmp_path / "s.db") as store:
        session = store.create_session("12p", "auto")  # type: ignore[arg-type]  # as it was
        for kind, payload in old:
            store.append_event(session.id, kind, payload)
        step, evaluation, profiled, failed, error, decision, unknown, version, mode = Journal(
            store, session.id
        ).history()
    assert isinstance(step, ev.StepStarted) and step.role is Role.PLANNER
    assert isinstance(evaluation, ev.EvaluationDone)
    assert isinstance(evaluation.report, EvalReport) and evaluation.verdict is Verdict.ACCEPTED
    assert evaluation.report.to_json() == report and evaluation.version_number == 0
    assert isinstance(profiled, ev.ProfileDone) and isinstance(profiled.summary, ProfileSummary)
    assert profiled.text == "Profile of old"
    assert isinstance(failed, ev.ProfileDone) and failed.summary is None
    assert failed.error == "it crashed"
    assert isinstance(error, ev.ErrorRaised) and error.role is Role.ENGINE
    assert isinstance(decision, ev.DecisionMade) and decision.action is Action.HANDOFF
    assert decision.mode is Mode.AUTO and decision.by is None
    assert isinstance(unknown, ev.DecisionMade) and unknown.by is None  # "" was "not known"
    assert isinstance(version, ev.VersionCreated) and version.origin is Role.DEBUGGER
    assert isinstance(mode, ev.ModeChanged) and mode.mode is Mode.AUTO
    assert store_session_mode_is_typed(tmp_path)


def store_session_mode_is_typed(tmp_path) -> bool:
    with Store(tmp_path / "s.db") as store:
        (summary_row,) = store.list_sessions()
    return isinstance(summary_row.session.mode, Enum) and summary_row.session.mode is Mode.AUTO


def rewrite_as_earlier_releases_stored(path, session: str) -> int:
    """The session's events as an earlier release wrote them: a profile's text inside its
    summary, a failed profile's summary `{}`. Returns how many rows changed."""
    changed = 0
    with sqlite3.connect(path) as conn:
        # the log is append-only (a trigger): lifted for this rewrite alone, then put back
        guards = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'"
        ).fetchall()
        for name, _ in guards:
            conn.execute(f"DROP TRIGGER {name}")
        rows = conn.execute(
            "SELECT seq, kind, payload FROM events WHERE session_id = ?", (session,)
        ).fetchall()
        for seq, kind, payload in rows:
            data = json.loads(payload)
            if kind != "profile":
                continue
            if data["summary"] is None:
                data["summary"] = {}
            elif data.get("text"):
                data["summary"] = dict(data["summary"], text=data.pop("text"))
            conn.execute(
                "UPDATE events SET payload = ? WHERE session_id = ? AND seq = ?",
                (json.dumps(data), session, seq),
            )
            changed += 1
        for _, sql in guards:
            conn.execute(sql)
    return changed


@pytest.mark.asyncio
async def test_a_session_stored_in_the_old_form_resumes_from_its_stored_steps(tmp_path) -> None:
    """Every stored event rewritten as an earlier release stored it (plain strings, reports as
    dicts, a failed profile's `{}`): the resumed engine reuses them all."""
    with Store(tmp_path / "s.db") as store:
        bench = Bench(store, tmp_path / "sessions")
        first = RoleProvider(
            {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
        )
        engine = bench.engine(first, max_iterations=1)
        outcome = await engine.run()
        assert outcome.best is not None
        session = engine.session_id
        store.update_session(session, status="stopped")  # type: ignore[arg-type]
    assert rewrite_as_earlier_releases_stored(tmp_path / "s.db", session) >= 1
    with Store(tmp_path / "s.db") as store:
        bench = Bench(store, tmp_path / "sessions", bench.tools)
        evaluated = len(bench.tools.evaluated)
        again = RoleProvider({})  # any question to the model would fail the test
        resumed = bench.engine(again, session_id=session, max_iterations=1)
        outcome_again = await resumed.run()
    assert outcome_again.best is not None and outcome_again.best.source == outcome.best.source
    assert again.prompts("planner") == [] and again.prompts("implementer") == []
    assert len(bench.tools.evaluated) == evaluated  # nothing evaluated again
