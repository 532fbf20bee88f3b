"""The built-in agent in a HITL session answers a rejection (fake harness, the agent's real
worker): asked to fuse the epilogue of a plain folder's matmul, it offers another kernel that
keeps it fused and says what it read; once every kernel it can write is turned down it says it
has nothing else, and the session waits for the engineer instead of ending."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.orchestration.events import LlmAnswer
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    REJECT,
    Decision,
    Proposal,
    ScriptedGate,
    Subject,
)
from maxkernel_tui.agents.providers import build_provider
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.store.db import Store
from tests.support.engine import Bench, FakeTools, events
from tests.support.task_folders import write_plain_small

REASON = "fuse the sigmoid and row sum into the matmul epilogue"


@pytest.mark.slow  # the agent's jax worker drafts for the task
async def test_the_builtin_agent_answers_each_rejection_until_it_has_nothing_else(tmp_path):
    task = load_task(write_plain_small(tmp_path / "tasks", "36k_Matmul_Sigmoid_Sum"))
    kernels: list[str] = []
    asked: list[Proposal] = []

    def decide(proposal: Proposal) -> Decision:
        if proposal.subject == Subject.PLAN:
            return Decision(APPROVE)
        if proposal.nothing_new:
            asked.append(proposal)
            return Decision(EDIT, content=kernels[0])  # the engineer takes the first one after all
        kernels.append(proposal.content)
        return Decision(REJECT, feedback=REASON)

    gate = ScriptedGate([decide] * 40)
    provider = build_provider({"name": "builtin"})
    with Store(tmp_path / "db") as db:
        bench = Bench(db, tmp_path / "sessions", FakeTools(task=task))
        engine = bench.engine(provider, gate=gate, mode="hitl", edge_cases=False)
        try:
            outcome = await engine.run()
        finally:
            await provider.aclose()
        answers = [
            e.text for e in events(db, engine.session_id, LlmAnswer) if e.role == "implementer"
        ]

    first, second = kernels[0], kernels[1]
    assert second != first
    # the first kernel fuses the epilogue already: the next keeps it in one pallas_call, and
    # the agent says what it read and why it cannot fuse more
    assert first.count("pallas_call(") == 1 and second.count("pallas_call(") == 1
    assert f"“{REASON}”" in answers[1] and "already runs as one pallas_call" in answers[1]
    # every kernel it offered was a new one, until it said it had nothing else
    assert len(set(kernels)) == len(kernels) > 3
    assert answers[-1].startswith("Nothing else to offer:")
    assert len(asked) == 1 and "were turned down" in asked[0].summary
    # the session stayed open: the engineer's answer was evaluated, and it ended on its own
    assert bench.tools.evaluated == [kernels[0]]
    assert outcome.reason == "max iterations (1)"
