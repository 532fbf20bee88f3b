"""The HITL/Auto loop on fake tools (no jax, milliseconds): Auto debugs, profiles, autotunes and
iterates until patience, the iteration limit, the target or the budget stops it; HITL's reject,
edit and hand-off; the edge cases; and the session's status, which only the engine writes."""

from __future__ import annotations

import json

import pytest

from maxkernel_tui.agents.budget import Budget, Cap
from maxkernel_tui.agents.orchestration.describe import describe
from maxkernel_tui.agents.orchestration.events import (
    BudgetReport,
    DecisionMade,
    EdgeCasesChosen,
    EvaluationDone,
    ModeChanged,
    Note,
    ProfileDone,
    decode,
)
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    HANDOFF,
    REJECT,
    Decider,
    Decision,
    ScriptedGate,
)
from maxkernel_tui.agents.roles.tunables import set_tunables
from maxkernel_tui.kernels.report.checks import EvalReport
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import (
    BAD,
    CHUNKED,
    DIAGNOSIS,
    GOOD,
    Bench,
    FakeTools,
    accepted,
    events,
    kernel,
    kinds,
    plan,
    rejected,
)

pytestmark = pytest.mark.asyncio


async def test_auto_debugs_a_failing_kernel_profiles_tunes_and_iterates(bench: Bench) -> None:
    provider = RoleProvider(
        {
            "planner": [plan("first"), plan("second")],
            "implementer": [kernel(BAD), kernel(GOOD)],
            "debugger": [kernel(GOOD)],
            "profiler": [DIAGNOSIS, DIAGNOSIS],
        }
    )
    engine = bench.engine(provider, max_iterations=2, tune_candidates=2, patience=5)
    outcome = await engine.run()

    store, session = bench.store, engine.session_id
    log = kinds(store, session)
    order = [
        "step_started:i1/plan",
        "proposal:i1/plan",
        "decision:i1/plan",
        "version:i1/implement",
        "evaluation:i1/implement",
        "step_started:i1/debug1",
        "evaluation:i1/debug1",
        "profile:i1/profile",
        "note:i1/diagnose",
        "profile:i1/tune/c0",
        "note:i1/tune",
        "evaluation:i1/tune/apply0",
        "profile:i1/tune/apply0/profile",
        "step_started:i2/plan",
        "session_ended:end/2",
    ]
    positions = [log.index(entry) for entry in order]
    assert positions == sorted(positions), log
    evaluations = events(store, session, EvaluationDone)
    assert [e.verdict for e in evaluations][:2] == ["rejected", "accepted"]
    assert evaluations[0].failure is not None and evaluations[0].failure.startswith("tpu_lower")
    assert "tpu_lower" in provider.prompts("debugger")[0]  # the debugger saw what failed
    assert "Next: larger row blocks" in provider.prompts("planner")[1]  # the diagnosis went on
    assert "est. speedup" in provider.prompts("planner")[1]  # and the profile, as text
    # the autotuner doubled the row block (the fake model's faster kernel) and kept it
    assert outcome.best is not None and outcome.best.source == set_tunables(
        GOOD, {"BLOCK_ROWS": 512}
    )
    assert outcome.best.score == 2.0 and outcome.score_kind.startswith("estimated speedup")
    # the fake profile finds no tolerance's precision: the score is against XLA as written, and
    # the other figure beside it says it is not known, to the session's end
    assert "(as written)" in outcome.score_kind
    assert outcome.best.score_also == "vs XLA@tolerance: not known"
    (end,) = [e for e in store.events(session) if e.kind == "session_ended"]
    assert end.payload["score_also"] == "vs XLA@tolerance: not known"
    assert outcome.reason == "max iterations (2)"
    assert store.session(session).status == "done"


async def test_a_profile_keeps_its_text_beside_its_summary(bench: Bench) -> None:
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )
    engine = bench.engine(provider)
    await engine.run()

    (profile,) = events(bench.store, engine.session_id, ProfileDone)
    assert isinstance(profile, ProfileDone)
    stored = profile.payload()
    assert "text" not in stored["summary"] and profile.text.startswith("Profile of")
    summary = profile.summary
    assert summary is not None and summary.estimates[0].speedup == 1.0
    # an event stored before the text had its own field still gives it
    older = {name: value for name, value in stored.items() if name != "text"}
    old = decode(ProfileDone.kind, {**older, "summary": dict(stored["summary"], text="old text")})
    assert isinstance(old, ProfileDone) and old.text == "old text"
    assert old.summary is not None and old.summary.estimates == summary.estimates


@pytest.mark.parametrize(
    "limits, reason",
    [
        ({"max_iterations": 5, "patience": 2}, "no significant improvement for 2 iterations"),
        ({"max_iterations": 3, "patience": 9}, "max iterations (3)"),
        ({"max_iterations": 5, "target_score": 0.9}, "target reached (1 ≥ 0.9, estimated"),
    ],
    ids=["patience", "max-iterations", "target"],
)
async def test_auto_stops_on_patience_the_iteration_limit_or_the_target(
    bench: Bench, limits: dict[str, object], reason: str
) -> None:
    provider = RoleProvider(
        {"planner": [plan()] * 5, "implementer": [kernel(GOOD)] * 5, "profiler": [DIAGNOSIS] * 5}
    )
    engine = bench.engine(provider, **limits)
    outcome = await engine.run()
    assert outcome.reason.startswith(reason)
    assert bench.store.session(engine.session_id).status == "done"


async def test_the_budget_stops_the_loop_before_a_call_that_could_pass_it(bench: Bench) -> None:
    provider = RoleProvider({"planner": [plan()]})
    engine = bench.engine(provider, budget=Budget("session", Cap(tokens=1000)))
    outcome = await engine.run()
    assert outcome.reason.startswith("budget:") and outcome.best is None
    assert provider.requests == []  # refused before anything was sent
    logged = kinds(bench.store, engine.session_id)
    assert logged[-1].startswith("session_ended") and events(
        bench.store, engine.session_id, BudgetReport
    )
    assert bench.store.session(engine.session_id).status == "stopped"


async def test_a_model_error_fails_the_session(bench: Bench) -> None:
    engine = bench.engine(RoleProvider({}))  # the planner has no answer: the provider fails
    outcome = await engine.run()
    assert outcome.reason.startswith("model error:")
    assert bench.store.session(engine.session_id).status == "failed"


async def test_hitl_reject_reaches_the_next_prompt_edit_replaces_and_hand_off_continues(
    bench: Bench,
) -> None:
    edited = set_tunables(GOOD, {"BLOCK_ROWS": 128})
    gate = ScriptedGate(
        [
            Decision(REJECT, feedback="use 512-row blocks"),
            Decision(APPROVE),
            Decision(EDIT, content=edited),
            Decision(HANDOFF, mode="auto"),
        ]
    )
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b"), plan("c")],
            "implementer": [kernel(GOOD)] * 2,
            "profiler": [DIAGNOSIS] * 2,
        }
    )
    engine = bench.engine(provider, gate=gate, mode="hitl", max_iterations=2, patience=5)
    await engine.run()

    store, session = bench.store, engine.session_id
    assert [p.subject for p in gate.seen] == ["plan", "plan", "kernel", "plan"]
    assert "use 512-row blocks" in provider.prompts("planner")[1]
    assert "use 512-row blocks" not in provider.prompts("planner")[0]
    versions = store.kernel_versions(session)
    assert versions[0].source == edited  # the edit, not the proposal, became v1
    modes = events(store, session, ModeChanged)
    assert [m.mode for m in modes] == ["auto"]
    # After the hand-off the loop went on from the same state without asking the scripted gate.
    assert len(versions) == 2 and versions[1].parent_id == versions[0].id
    assert store.session(session).mode == "auto"


async def test_the_engineers_edit_and_message_are_taken_at_the_next_step(bench: Bench) -> None:
    edited = set_tunables(GOOD, {"BLOCK_ROWS": 64})
    gate = ScriptedGate()
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )
    engine = bench.engine(provider, gate=gate, mode="hitl")
    engine.intervene("message", "keep the hidden dimension whole")
    engine.intervene("kernel", edited)
    with pytest.raises(ValueError, match="unknown intervention"):
        engine.intervene("plot", "?")
    await engine.run()

    assert "keep the hidden dimension whole" in provider.prompts("planner")[0]
    assert bench.store.kernel_versions(engine.session_id)[0].source == edited
    assert gate.seen[1].previous == edited  # the implementer's proposal replaces the edit


async def test_an_edge_case_fails_the_first_kernel_and_goes_to_the_debugger(bench: Bench) -> None:
    def judge(source: str, tools: FakeTools) -> EvalReport:
        if source == CHUNKED and tools.extra_configs:
            return rejected("edge", "edge_hidden: max error 0.5")
        return accepted()

    tools = FakeTools(judge=judge, edges=frozenset({"edge_hidden"}))
    edge = {"name": "edge_hidden", "params": {"hidden": 384}, "why": "3 lane tiles"}
    ragged = {"name": "edge_ragged", "params": {"seq": 41}, "why": "odd rows"}
    provider = RoleProvider(
        {
            "planner": [plan()],
            "implementer": [kernel(CHUNKED)],
            "tester": [json.dumps({"configs": [edge, ragged]})],
            "debugger": [kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    engine = bench.engine(provider, tools=tools)
    await engine.run()

    store, session = bench.store, engine.session_id
    (chosen,) = events(store, session, EdgeCasesChosen)
    assert chosen.accepted == [["edge_hidden", {"hidden": 384}]]
    assert chosen.rejected[0].startswith("edge_ragged")
    note = next(n for n in events(store, session, Note) if n.ref == "i1/tester/note")
    assert "edge case edge_hidden" in note.text and "rejected edge_ragged" in note.text
    judged = {e.step: e for e in events(store, session, EvaluationDone)}
    assert judged["i1/implement"].verdict == "accepted"
    assert judged["i1/tester"].verdict == "rejected"
    # the tester's evaluation is an edge pass joined to the accepted kernel's report
    tester_checks = [(c.name, c.status) for c in judged["i1/tester"].report.checks]
    assert tester_checks == [("static", "pass"), ("numerics", "pass"), ("edge", "fail")]
    assert "edge: edge_hidden" in provider.prompts("debugger")[0]
    assert judged["i1/debug1"].verdict == "accepted"
    assert tools.edge_passes == 1  # the debugger's fix gets a full evaluation, edges included
    assert tools.extra_configs == [("edge_hidden", {"hidden": 384})]


async def test_the_harness_checks_reach_the_log_as_they_come(bench: Bench) -> None:
    tools = FakeTools(judge=lambda source, tools: accepted())
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )
    engine = bench.engine(provider, tools=tools)
    await engine.run()
    notes = [n.ref for n in events(bench.store, engine.session_id, Note)]
    assert "i1/implement/check/numerics" in notes


async def test_an_unchanged_plan_is_kept_without_asking_in_hitl(bench: Bench) -> None:
    gate = ScriptedGate([Decision(APPROVE)] * 8)
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("a")],  # iteration 2 repeats the approved plan
            "implementer": [kernel(GOOD)] * 2,
            "profiler": [DIAGNOSIS] * 2,
        }
    )
    engine = bench.engine(provider, gate=gate, mode="hitl", max_iterations=2, patience=5)
    await engine.run()

    asked = [(p.step, p.subject) for p in gate.seen]
    assert ("i1/plan", "plan") in asked and ("i2/plan", "plan") not in asked
    decisions = {d.step: d for d in events(bench.store, engine.session_id, DecisionMade)}
    assert decisions["i2/plan"].action == APPROVE and decisions["i2/plan"].by is Decider.UNCHANGED
    notes = [line for line in map(describe, events(bench.store, engine.session_id)) if line]
    assert "  unchanged: the same as before, kept without asking" in notes
