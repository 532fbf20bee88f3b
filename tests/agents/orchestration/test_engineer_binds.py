"""The engineer's changes bind the agents (fake tools, no jax): every role's next request quotes
them; a proposal that undoes one is flagged in its diff summary and goes to the engineer in HITL;
in Auto it stays only with a better verdict than the engineer's version."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from maxkernel_tui.agents.orchestration.engine import SessionEngine
from maxkernel_tui.agents.orchestration.engineer import EngineerEdit
from maxkernel_tui.agents.orchestration.events import Note, ProposalMade
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    AutoGate,
    Decider,
    Decision,
    GateHolder,
    InteractiveGate,
    Proposal,
    ScriptedGate,
)
from maxkernel_tui.agents.roles.tunables import set_tunables
from maxkernel_tui.kernels.report.checks import EvalReport
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import (
    DIAGNOSIS,
    GOOD,
    Bench,
    FakeTools,
    accepted,
    events,
    kernel,
    plan,
    rejected,
)


def rows(n: int) -> str:
    return set_tunables(GOOD, {"BLOCK_ROWS": n})


def test_a_revert_is_a_line_the_engineer_removed_coming_back_or_all_they_added_gone() -> None:
    edit = EngineerEdit("i1/implement", rows(256), rows(64))
    assert edit.undone_by(rows(256)) == ["BLOCK_ROWS = 256"]  # brought back
    assert edit.undone_by(rows(128)) == ["BLOCK_ROWS = 64"]  # the engineer's line gone
    assert edit.undone_by(rows(64) + "\n# a comment\n") == []  # kept (comments aside)
    added = EngineerEdit("s", GOOD, GOOD + "\nassert True\n")
    assert added.undone_by(GOOD.replace("    ", "  ")) == ["assert True"]  # layout aside


@pytest.mark.asyncio
async def test_in_hitl_a_revert_of_the_engineers_edit_is_flagged_and_asked(bench: Bench) -> None:
    gate = ScriptedGate(
        [
            Decision(APPROVE),  # plan
            Decision(EDIT, content=rows(64)),  # the engineer's fix of the proposed kernel
            Decision(APPROVE),  # plan 2
        ]
    )
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(GOOD), kernel(GOOD)],  # iteration 2 proposes GOOD again
            "profiler": [DIAGNOSIS] * 2,
            "explainer": ["Because the engineer chose 64-row blocks."],
        }
    )
    engine = bench.engine(provider, gate=gate, mode="hitl", max_iterations=2, patience=5)
    await engine.run()
    await engine.explain("why 64?")

    kernels = [p for p in gate.seen if p.subject == "kernel"]
    assert kernels[0].reverts == ""
    flagged = kernels[1]
    assert flagged.content == GOOD and flagged.step == "i2/implement"
    assert flagged.reverts.startswith("reverts the engineer's change (v1): `BLOCK_ROWS = 256`")
    assert "⚠ reverts the engineer's change" in flagged.summary
    stored = [p for p in events(bench.store, engine.session_id, ProposalMade) if p.reverts]
    assert [p.step for p in stored] == ["i2/implement"]
    # every role's next request carries the engineer's change
    assert "keep these changes" in provider.prompts("planner")[1]
    assert "+BLOCK_ROWS = 64" in provider.prompts("implementer")[1]
    assert "+BLOCK_ROWS = 64" in provider.prompts("explainer")[0]


class EditsAtSecondPlan:
    """The auto gate, while the engineer edits the kernel as iteration 2's plan is proposed (the
    edit is taken at the next step boundary: before iteration 2's implementer)."""

    name = Decider.AUTO

    def __init__(self, engine_edit: Callable[[], None]) -> None:
        self.edit = engine_edit

    async def decide(self, proposal: Proposal) -> Decision:
        if proposal.step == "i2/plan":
            self.edit()
        return Decision(APPROVE)


async def auto_session_with_an_edit(bench: Bench, edited: str, tools: FakeTools) -> SessionEngine:
    """Iteration 1 writes GOOD; the engineer changes it to `edited`; iteration 2's implementer
    proposes GOOD again, undoing the change."""
    provider = RoleProvider(
        {
            "planner": [plan("a"), plan("b")],
            "implementer": [kernel(GOOD), kernel(GOOD)],
            "profiler": [DIAGNOSIS] * 2,
        }
    )
    engines: list[SessionEngine] = []
    gate = EditsAtSecondPlan(lambda: engines[0].intervene("kernel", edited))
    engine = bench.engine(
        provider, gate=gate, tools=tools, max_iterations=2, patience=5, edge_cases=False
    )
    engines.append(engine)
    await engine.run()
    return engine


def engine_notes(bench: Bench, engine: SessionEngine) -> list[str]:
    """What the engine said of reverts."""
    notes = events(bench.store, engine.session_id, Note)
    return [n.text for n in notes if n.role == "engine" and "reverts" in n.text]


@pytest.mark.asyncio
async def test_in_auto_a_revert_that_is_not_better_leaves_the_engineers_version(
    bench: Bench,
) -> None:
    engine = await auto_session_with_an_edit(bench, rows(512), bench.tools)  # 2.0 vs GOOD's 1.0

    assert engine.best is not None and engine.best.source == rows(512)
    assert engine.kernel == rows(512)
    (note,) = engine_notes(bench, engine)
    assert "reverts the engineer's change (v2): `BLOCK_ROWS = 256`" in note
    assert "without a better verdict: v2 stays current" in note
    assert bench.tools.evaluated == [GOOD, rows(512)]  # GOOD judged once; v2 judged to compare


@pytest.mark.asyncio
async def test_in_auto_a_revert_with_a_better_verdict_stays(bench: Bench) -> None:
    def judge(source: str, tools: FakeTools) -> EvalReport:
        return rejected() if source == rows(128) else accepted()

    tools = FakeTools(judge=judge)
    engine = await auto_session_with_an_edit(bench, rows(128), tools)  # the harness rejects it

    assert engine.kernel == GOOD
    (note,) = engine_notes(bench, engine)
    assert "and does better: it stays" in note
    assert not engine.edits.edits  # the change no longer binds


@pytest.mark.asyncio
async def test_a_hand_off_while_a_revert_waits_is_autos_decision_not_the_engineers() -> None:
    waiting = InteractiveGate()
    holder = GateHolder(waiting)
    proposal = Proposal("i2/implement", "implementer", "kernel", GOOD, rows(64), "+1 −1")
    decided = asyncio.create_task(holder.decide(proposal))
    while waiting.pending is None:
        await asyncio.sleep(0)
    holder.swap(AutoGate())  # F2 while the revert is on screen
    decision, by = await decided
    assert decision.action == APPROVE and by == "auto"  # judged as Auto's, against the edit
