"""Resume on fake tools (no jax, milliseconds): a session stopped in the middle is marked stopped
by the engine, and running it again repeats no stored model call, decision, evaluation or
profile."""

from __future__ import annotations

import asyncio

import pytest

from maxkernel_tui.agents.orchestration.events import (
    EarlierVerdict,
    Note,
    ProposalRepeated,
    SessionEnded,
)
from maxkernel_tui.agents.orchestration.gates import ScriptedGate
from maxkernel_tui.agents.roles.tunables import set_tunables
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import (
    BAD,
    DIAGNOSIS,
    GOOD,
    Bench,
    FakeTools,
    StopAt,
    events,
    kernel,
    plan,
)

pytestmark = pytest.mark.asyncio


async def test_a_stopped_session_resumes_without_repeating_stored_work(bench: Bench) -> None:
    first = RoleProvider(
        {
            "planner": [plan()],
            "implementer": [kernel(BAD)],
            "debugger": [kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    gate = StopAt("i1/tune/apply0")  # after the profile and the autotune's estimates
    engine = bench.engine(first, gate=gate, mode="hitl", tune_candidates=2)
    running = asyncio.create_task(engine.run())
    await asyncio.wait_for(gate.reached.wait(), 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    store, session = bench.store, engine.session_id
    assert store.session(session).status == "stopped"  # the engine said so, not its caller
    paid = len(store.llm_calls(session))

    second, again, tools = RoleProvider({}), ScriptedGate(), FakeTools()
    resumed = bench.engine(
        second, gate=again, mode="hitl", session_id=session, tools=tools, tune_candidates=2
    )
    outcome = await resumed.run()

    assert second.requests == []  # every model answer was stored
    assert [p.step for p in again.seen] == ["i1/tune/apply0"]  # only the undecided proposal
    tuned = set_tunables(GOOD, {"BLOCK_ROWS": 512})
    assert tools.evaluated == [tuned]  # the stored evaluations were not run again
    assert tools.profiled == [(tuned, False)]  # nor the profile and the estimates
    assert outcome.best is not None and outcome.best.source == tuned
    assert len(events(store, session, SessionEnded)) == 1
    refs = [e.payload["ref"] for e in store.events(session)]
    assert len(refs) == len(set(refs))  # the replay wrote nothing twice
    assert len(store.llm_calls(session)) == paid
    assert store.session(session).status == "done"


async def test_a_resumed_session_replays_its_repeats_and_earlier_verdicts_as_they_were(
    bench: Bench,
) -> None:
    # the debugger repeats the rejected BAD (asked again) then writes GOOD; iteration 2 writes
    # GOOD again (an earlier verdict, nothing new to do); the session stops at iteration 3's plan
    first = RoleProvider(
        {
            "planner": [plan("a"), plan("b"), plan("c")],
            "implementer": [kernel(BAD), kernel(GOOD)],
            "debugger": [kernel(BAD), kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    gate = StopAt("i3/plan")
    engine = bench.engine(first, gate=gate, mode="hitl", max_iterations=3, patience=5)
    running = asyncio.create_task(engine.run())
    await asyncio.wait_for(gate.reached.wait(), 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    store, session = bench.store, engine.session_id
    assert [r.step for r in events(store, session, ProposalRepeated)] == ["i1/debug1"]
    assert [e.step for e in events(store, session, EarlierVerdict)] == ["i2/implement"]
    again = [n for n in events(store, session, Note) if n.ref == "i2/again"]
    assert len(again) == 1 and "v2 again: profiled and tuned before" in again[0].text

    second, tools = RoleProvider({"implementer": [kernel(GOOD)]}), FakeTools()
    resumed = bench.engine(
        second,
        gate=ScriptedGate(),
        mode="hitl",
        session_id=session,
        tools=tools,
        max_iterations=3,
        patience=5,
    )
    await resumed.run()
    assert len(second.requests) == 1  # i3's implementer: the rest replayed as it was
    assert tools.evaluated == []  # GOOD was judged before the stop: never again after it
    earlier = [e.step for e in events(store, session, EarlierVerdict)]
    assert earlier == ["i2/implement", "i3/implement"]
    refs = [e.payload["ref"] for e in store.events(session)]
    assert len(refs) == len(set(refs))
