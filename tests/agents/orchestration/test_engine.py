"""The loop on a real task with the real harness and profiler: Auto end to end, HITL decisions
through a scripted gate, hand-off, and resume without paying twice."""

from __future__ import annotations

import asyncio

import pytest

from maxkernel_tui.agents.orchestration.events import (
    EvaluationDone,
    ModeChanged,
    ProfileDone,
    SessionEnded,
    decode,
)
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    HANDOFF,
    REJECT,
    Decision,
    ScriptedGate,
)
from maxkernel_tui.agents.roles.tunables import set_tunables
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import BAD, DIAGNOSIS, GOOD, kernel, plan

# the real harness and profiler in worker processes: tens of seconds per test
# the real harness: the heavy tier (test_loop.py runs them on fake tools in the fast tier)
pytestmark = [pytest.mark.asyncio, pytest.mark.slow, pytest.mark.heavy]


def kinds(store, session_id: str) -> list[str]:
    return [
        f"{e.kind}:{e.payload.get('step', e.payload.get('ref'))}" for e in store.events(session_id)
    ]


async def test_auto_debugs_a_failing_kernel_profiles_tunes_and_iterates(open_on, store) -> None:
    provider = RoleProvider(
        {
            "planner": [plan("first"), plan("second")],
            "implementer": [kernel(BAD), kernel(GOOD)],
            "debugger": [kernel(GOOD)],
            "profiler": [DIAGNOSIS, DIAGNOSIS],
        }
    )
    opened = await open_on(provider, max_iterations=2, tune_candidates=2, patience=5)
    outcome = await opened.engine.run()

    log = kinds(store, opened.session_id)
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
        "step_started:i2/plan",
        "session_ended:end/2",
    ]
    positions = [log.index(entry) for entry in order]
    assert positions == sorted(positions), log
    evaluations = [
        decode(e.kind, e.payload) for e in store.events(opened.session_id) if e.kind == "evaluation"
    ]
    assert isinstance(evaluations[0], EvaluationDone) and evaluations[0].verdict == "rejected"
    assert evaluations[0].failure.startswith("tpu_lower")
    assert evaluations[1].verdict == "accepted"
    assert "tpu_lower" in provider.prompts("debugger")[0]  # the debugger saw what failed
    assert (
        "Next: larger row blocks" in provider.prompts("planner")[1]
    )  # the diagnosis reached the next plan
    profiles = [
        decode(e.kind, e.payload) for e in store.events(opened.session_id) if e.kind == "profile"
    ]
    assert all(
        isinstance(p, ProfileDone) and p.score_kind.startswith("estimated") for p in profiles
    )
    # The best kernel is an accepted one, and the store agrees.
    assert outcome.best is not None
    accepted = {e.version_id for e in evaluations if e.verdict == "accepted"}
    assert outcome.best.version_id in accepted
    assert store.session(opened.session_id).status == "done"
    assert outcome.reason == "max iterations (2)"


async def test_hitl_reject_reaches_the_next_prompt_edit_replaces_and_hand_off_continues(
    open_on, store
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
    opened = await open_on(provider, gate=gate, mode="hitl", max_iterations=2, patience=5)
    await opened.engine.run()

    assert [p.subject for p in gate.seen] == ["plan", "plan", "kernel", "plan"]
    assert "use 512-row blocks" in provider.prompts("planner")[1]
    assert "use 512-row blocks" not in provider.prompts("planner")[0]
    versions = store.kernel_versions(opened.session_id)
    assert versions[0].source == edited  # the edit, not the proposal, became v1
    modes = [decode(e.kind, e.payload) for e in store.events(opened.session_id) if e.kind == "mode"]
    assert [m.mode for m in modes] == ["auto"] and isinstance(modes[0], ModeChanged)
    # After the hand-off the loop went on from the same state without asking the scripted gate.
    assert len(versions) == 2 and versions[1].parent_id == versions[0].id
    assert store.session(opened.session_id).mode == "auto"


async def test_a_stopped_session_resumes_without_repeating_stored_calls(open_on, store) -> None:
    first = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(BAD)], "debugger": [kernel(GOOD)]}
    )
    opened = await open_on(first)
    failed = asyncio.Event()
    opened.engine.journal.subscribe(
        lambda e: failed.set() if isinstance(e, EvaluationDone) else None
    )
    running = asyncio.create_task(opened.engine.run())
    await asyncio.wait_for(failed.wait(), 300)
    running.cancel()  # stopped mid-session: the debugger's step has started or is about to
    with pytest.raises(asyncio.CancelledError):
        await running
    paid_before = len(store.llm_calls(opened.session_id))

    second = RoleProvider({"debugger": [kernel(GOOD)], "profiler": [DIAGNOSIS]})
    resumed = await open_on(second, resume=opened.session_id[:6])
    assert resumed.resumed and resumed.session_id == opened.session_id
    outcome = await resumed.engine.run()

    roles = [(r.context or {})["role"] for r in second.requests]
    assert "planner" not in roles and "implementer" not in roles  # stored answers were reused
    assert outcome.best is not None
    ended = [e for e in store.events(opened.session_id) if e.kind == "session_ended"]
    assert len(ended) == 1 and isinstance(decode(ended[0].kind, ended[0].payload), SessionEnded)
    # Every event key is unique: the replay wrote nothing twice.
    keys = [e.payload["ref"] for e in store.events(opened.session_id)]
    assert len(keys) == len(set(keys))
    assert len(store.llm_calls(opened.session_id)) == paid_before + len(second.requests)


async def test_the_budget_stops_the_loop_before_a_call_that_could_pass_it(
    open_on, store, settings
) -> None:
    from dataclasses import replace

    from maxkernel_tui.agents.orchestration.engine import LoopLimits
    from maxkernel_tui.agents.orchestration.gates import AutoGate
    from maxkernel_tui.agents.orchestration.session import open_session
    from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task

    provider = RoleProvider({"planner": [plan()]})
    opened = await open_session(
        store,
        replace(settings, budget_tokens=1000),
        task=load_task(builtin_suite_dir() / "12p_RMSNorm"),
        mode="auto",
        gates=lambda mode: AutoGate(),
        limits=LoopLimits(max_iterations=1),
        provider=provider,
    )
    try:
        outcome = await opened.engine.run()
    finally:
        await opened.aclose()
    assert outcome.reason.startswith("budget:") and outcome.best is None
    assert provider.requests == []  # refused before anything was sent
    kinds_seen = [e.kind for e in store.events(opened.session_id)]
    assert "budget" in kinds_seen and kinds_seen[-1] == "session_ended"
    assert store.session(opened.session_id).status == "stopped"
