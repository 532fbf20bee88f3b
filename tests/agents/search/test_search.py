"""Each algorithm end to end on 12p_RMSNorm: it runs to its evaluation budget, never ranks a
rejected kernel, and the graph in the store is the graph the events describe."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.orchestration.events import EvaluationDone
from maxkernel_tui.agents.search.graph import ACCEPTED, REJECTED, STOPPED
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import (
    BAD,
    GOOD,
    graph_from_events,
    graph_in_store,
    kernel,
    variant,
)

# the real harness and profiler in worker processes: tens of seconds per test
pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


def evaluations(store, session_id: str) -> int:
    return sum(e.kind == EvaluationDone.kind for e in store.events(session_id))


@pytest.mark.parametrize(
    "algorithm, shape, first, budget",
    [
        # the beam's first kernel fails TPU lowering and the debugger fixes it: two evaluations;
        # 12p's kernels reach its roofline plus dispatch, so a floor above one has them expanded
        ("beam", {"width": 2, "branches": 2, "headroom_floor": 2.0}, kernel(BAD), 3),
        # the heavy tier: the same runner, other algorithms (expansion.py's fake-tool tests)
        pytest.param("parallel", {"width": 2}, variant(256), 2, marks=pytest.mark.heavy),
        pytest.param(
            "evolve", {"population": 4, "islands": 2}, variant(256), 2, marks=pytest.mark.heavy
        ),
    ],
    ids=["beam", "parallel", "evolve"],
)
async def test_a_search_runs_to_its_budget_and_ranks_only_accepted_kernels(
    open_search_on, store, algorithm, shape, first, budget
) -> None:
    provider = RoleProvider(
        {
            "implementer": [first, variant(128), variant(512), variant(64), variant(32)],
            "debugger": [kernel(GOOD)] * 4,
        }
    )
    opened = await open_search_on(
        provider, algorithm=algorithm, depth=4, max_evals=budget, llm_concurrency=2, **shape
    )
    outcome = await opened.search.run()
    await opened.aclose()
    session = opened.session_id
    assert outcome.reason == f"evaluation budget spent ({budget}/{budget})"
    assert evaluations(store, session) == budget == outcome.evaluations
    nodes = opened.search.graph.in_order()
    assert nodes[0].status == ACCEPTED and nodes[0].evals == budget - 1
    assert any(n.status == STOPPED for n in nodes)  # a node that found no evaluation left
    ranked = opened.search.graph.ranked()
    assert ranked and all(
        n.status == ACCEPTED and n.score_kind == outcome.score_kind for n in ranked
    )
    assert outcome.best is ranked[0] and "estimated" in outcome.score_kind
    assert not any(n.status == REJECTED for n in ranked)
    assert graph_from_events(store, session) == graph_in_store(store, session)
    assert store.session(session).status == "done"
