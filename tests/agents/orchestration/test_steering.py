"""A rejection steers the next proposal and never ends a HITL session (fake tools, no jax): the
reason and the kernel turned down reach the model's next prompt; a model with nothing new (it
only repeats, or says so) makes the engine ask the engineer what now, at the gate, and the
session goes on with the answer; a chat message reaches the next prompt as the engineer's."""

from __future__ import annotations

import json

import pytest

from maxkernel_tui.agents.orchestration.events import ProposalMade, ProposalRepeated
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    REJECT,
    Decision,
    Proposal,
    ScriptedGate,
    Subject,
)
from maxkernel_tui.agents.orchestration.limits import LoopLimits
from maxkernel_tui.agents.orchestration.verdicts import VerdictBook
from maxkernel_tui.agents.roles.context import NOTHING_ELSE
from maxkernel_tui.agents.roles.tunables import set_tunables
from tests.fakes.role_provider import NO_EDGE_CASES, RoleProvider
from tests.support.engine import DIAGNOSIS, GOOD, Bench, events, kernel, plan, rmsnorm_task
from tests.support.llm import serve

REASON = "fuse the sigmoid and row sum into the matmul epilogue"
SLOWER = set_tunables(GOOD, {"BLOCK_ROWS": 128})


def implementer_contexts(provider: RoleProvider) -> list[dict]:
    return [r.context for r in provider.requests if (r.context or {}).get("role") == "implementer"]


@pytest.mark.asyncio
async def test_the_reason_and_the_kernel_turned_down_reach_the_model_s_next_prompt(
    bench: Bench,
) -> None:
    provider = RoleProvider(
        {
            "planner": [plan()],
            "implementer": [kernel(SLOWER), kernel(GOOD)],
            "profiler": [DIAGNOSIS],
        }
    )
    gate = ScriptedGate([Decision(APPROVE), Decision(REJECT, feedback=REASON)])
    engine = bench.engine(provider, gate=gate, mode="hitl")
    outcome = await engine.run()

    second = provider.prompts("implementer")[1]
    assert REASON in second
    assert "Turned down at this step" in second and "BLOCK_ROWS = 128" in second
    assert implementer_contexts(provider)[1]["turned_down"] == [
        {"content": SLOWER, "reason": f"rejected by the engineer: {REASON}"}
    ]
    assert outcome.reason == "max iterations (1)" and bench.tools.evaluated == [GOOD]


@pytest.mark.asyncio
async def test_in_hitl_a_model_that_only_repeats_the_rejected_kernel_asks_the_engineer(
    bench: Bench,
) -> None:
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(SLOWER)] * 5, "profiler": [DIAGNOSIS]}
    )

    def take_mine(proposal: Proposal) -> Decision:
        return Decision(EDIT, content=GOOD)

    gate = ScriptedGate([Decision(APPROVE), Decision(REJECT, feedback=REASON), take_mine])
    engine = bench.engine(provider, gate=gate, mode="hitl")
    outcome = await engine.run()

    asked = gate.seen[2]
    assert asked.nothing_new and asked.subject == Subject.KERNEL
    assert "repeated kernels already turned down" in asked.summary
    # the session went on with the engineer's kernel, to its own end
    assert outcome.reason == "max iterations (1)"
    assert bench.tools.evaluated == [GOOD]
    assert engine.store.session(engine.session_id).status == "done"


@pytest.mark.asyncio
async def test_an_agent_that_says_it_has_nothing_else_is_answered_by_the_engineer_at_once(
    bench: Bench,
) -> None:
    why = "every tiling I know was turned down"
    provider = RoleProvider(
        {
            "planner": [plan()],
            "implementer": [
                kernel(SLOWER),
                f"{NOTHING_ELSE} {why}.\n\n" + kernel(SLOWER),
                kernel(GOOD),
            ],
            "profiler": [DIAGNOSIS],
        }
    )
    gate = ScriptedGate(
        [
            Decision(APPROVE),
            Decision(REJECT, feedback=REASON),
            Decision(REJECT, feedback="try 512-row blocks"),
        ]
    )
    engine = bench.engine(provider, gate=gate, mode="hitl")
    outcome = await engine.run()

    asked = gate.seen[2]
    assert asked.nothing_new and why in asked.summary
    assert len(provider.prompts("implementer")) == 3  # asked once more, not until it repeats
    assert "the engineer's message: try 512-row blocks" in provider.prompts("implementer")[2]
    assert [r.nothing_new for r in events(bench.store, engine.session_id, ProposalRepeated)] == [
        True
    ]
    assert [p.content for p in gate.seen[3:4]] == [GOOD]
    assert outcome.reason == "max iterations (1)"
    # resumed, the book does not hold the current kernel shown at that question as refused
    book = VerdictBook(rmsnorm_task(), "v5e", engine.journal.history())
    asked_events = [e for e in events(bench.store, engine.session_id, ProposalMade)]
    assert any(e.nothing_new for e in asked_events)
    assert book.rejection(GOOD) is None


@pytest.mark.asyncio
async def test_a_message_reaches_the_next_prompt_as_the_engineer_s(bench: Bench) -> None:
    provider = RoleProvider(
        {"planner": [plan()], "implementer": [kernel(GOOD)], "profiler": [DIAGNOSIS]}
    )

    def message_then_approve(proposal: Proposal) -> Decision:
        engine.intervene(Subject.MESSAGE, "keep the blocks square")
        return Decision(APPROVE)

    gate = ScriptedGate([message_then_approve])
    engine = bench.engine(provider, gate=gate, mode="hitl")
    await engine.run()

    assert "the engineer's message: keep the blocks square" in provider.prompts("implementer")[0]
    assert implementer_contexts(provider)[0]["feedback"] == [
        "the engineer's message: keep the blocks square"
    ]


def test_stored_limits_of_older_sessions_still_load() -> None:
    # sessions stored a rejection limit that is gone: the engineer decides how often to reject
    stored = {**LoopLimits(max_iterations=2).to_json(), "max_rejections": 5}
    assert LoopLimits.from_json(stored) == LoopLimits(max_iterations=2)


@pytest.mark.parametrize("kind", ["gemini", "openai"])
@pytest.mark.asyncio
async def test_over_http_the_next_request_carries_the_reason_and_the_kernel_turned_down(
    bench: Bench, kind: str
) -> None:
    answers = {
        "planner": [plan()],
        "implementer": [kernel(SLOWER), kernel(GOOD)],
        "profiler": [DIAGNOSIS],
        "tester": [NO_EDGE_CASES],
    }
    server, provider = await serve(kind, answers)
    gate = ScriptedGate([Decision(APPROVE), Decision(REJECT, feedback=REASON)])
    try:
        await bench.engine(provider, gate=gate, mode="hitl").run()
    finally:
        await provider.aclose()
        await server.stop()

    first, second = (json.dumps(b) for b in server.bodies_of("implementer"))
    assert REASON not in first and REASON in second
    assert "BLOCK_ROWS = 128" not in first and "BLOCK_ROWS = 128" in second
