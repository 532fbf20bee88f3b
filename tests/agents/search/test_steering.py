"""Steering a search on fake tools (no jax, milliseconds): an idea, a strategy, an expansion and a
hand-made kernel each add a node to the next round, from the node they were given at; a pinned
node survives pruning; steering given after the search reached its depth runs one more round; a
resumed search replays the rounds it planned with the steering they had, without doubling a
node; every action is stored and announced once."""

from __future__ import annotations

import pytest

from maxkernel_tui.agents.orchestration.events import Steered, StrategySkipped
from maxkernel_tui.agents.roles.tunables import set_tunables
from maxkernel_tui.agents.search.graph import ACCEPTED, PRUNED, REJECTED
from maxkernel_tui.agents.search.steering import BY_HAND, IDEA, Steer, give, given
from maxkernel_tui.agents.strategies import applicable
from maxkernel_tui.store.kinds import SteerAction
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import BAD, GOOD, Bench, events, kernel, variant

pytestmark = pytest.mark.asyncio

IDEA_TEXT = "try a 512-row block and keep the f32 accumulation"


def provider(count: int = 8) -> RoleProvider:
    rows = [256, 128, 512, 64, 32, 1024, 2048, 16, 8, 4096][:count]
    return RoleProvider({"implementer": [variant(r) for r in rows]})


def steered_nodes(search, strategy: str) -> list:
    return [n for n in search.graph.in_order() if n.strategy == strategy]


async def test_an_idea_at_a_node_grows_a_child_whose_implementer_reads_it(bench: Bench) -> None:
    roles = provider()
    search = bench.search(roles, algorithm="parallel", width=1, depth=1)
    search.steer(Steer(SteerAction.IDEA, node="n0", text=IDEA_TEXT))
    await search.run()

    (idea,) = steered_nodes(search, IDEA)
    assert idea.parents == ["n0"] and idea.round == 1 and IDEA_TEXT in idea.plan
    assert idea.status == ACCEPTED
    assert any(IDEA_TEXT in prompt for prompt in roles.prompts("implementer"))
    (event,) = events(bench.store, search.base.session_id, Steered)
    assert event.action == SteerAction.IDEA and event.round == 1 and IDEA_TEXT in event.words


async def test_a_strategy_and_an_expansion_add_library_moves_at_the_node(bench: Bench) -> None:
    search = bench.search(provider(), algorithm="parallel", width=1, depth=1)
    strategy = applicable(search.base.task.category)[-1]
    search.steer(Steer(SteerAction.STRATEGY, node="n0", strategy=strategy.name))
    search.steer(Steer(SteerAction.EXPAND, node="n0"))
    await search.run()

    round_one = [n for n in search.graph.in_order() if n.round == 1]
    assert len(round_one) == 3  # the algorithm's node, then the two steered ones in order
    assert round_one[1].strategy == strategy.name and round_one[1].tags["steer"] == 1
    assert round_one[2].tags["steer"] == 2 and round_one[2].parents == ["n0"]


async def test_a_hand_made_kernel_is_judged_as_a_child_without_a_model(bench: Bench) -> None:
    roles = provider(2)
    search = bench.search(roles, algorithm="parallel", width=1, depth=1)
    mine = set_tunables(GOOD, {"BLOCK_ROWS": 1024})
    search.steer(Steer(SteerAction.HAND_CHILD, node="n0", source=BAD))
    search.steer(Steer(SteerAction.HAND_CHILD, node="n0", source=mine))
    await search.run()

    bad, good = steered_nodes(search, BY_HAND)
    assert bad.status == REJECTED and bad.parents == ["n0"] and bad.source == BAD
    assert good.status == ACCEPTED and good.score == 4.0 and good.evals == 1
    assert search.graph.ranked()[0] is good  # the best kernel of the search is the engineer's
    assert len(roles.prompts("implementer")) == 2  # the root and the algorithm's node only


async def test_a_pinned_node_is_kept_when_its_branch_is_pruned(bench: Bench) -> None:
    search = bench.search(provider(), algorithm="parallel", width=1, depth=1)
    await search.run()
    child = search.graph.in_order()[1]
    search.steer(Steer(SteerAction.PIN, node=child.ref))
    pruned = search.prune("n0")
    assert [n.ref for n in pruned] == ["n0"] and child.pruned_round is None
    search.steer(Steer(SteerAction.UNPIN, node=child.ref))
    assert [n.ref for n in search.prune("n0")] == []  # n0 already pruned: nothing more
    assert [n.ref for n in search.prune(child.ref)] == [child.ref]
    assert child.status == PRUNED or child.pruned_round is not None


async def test_steering_after_the_depth_runs_one_more_round_on_resume(bench: Bench) -> None:
    roles = provider()
    search = bench.search(roles, algorithm="parallel", width=1, depth=1)
    outcome = await search.run()
    assert outcome.reason == "depth 1 reached" and len(search.graph) == 2
    session = search.base.session_id
    give(bench.store, session, Steer(SteerAction.IDEA, node="n1", text=IDEA_TEXT))

    resumed = bench.search(roles, session_id=session)
    await resumed.run()
    (idea,) = steered_nodes(resumed, IDEA)
    assert idea.round == 2 and idea.parents == ["n1"] and idea.status == ACCEPTED
    # a second resume replays every round with the steering it had: nothing new is made
    again = bench.search(roles, session_id=session)
    await again.run()
    assert len(again.graph) == 3
    assert len(events(bench.store, session, Steered)) == 1
    assert [s.action for s in given(bench.store, session)] == [SteerAction.IDEA]


async def test_a_node_steering_needs_a_node(bench: Bench) -> None:
    search = bench.search(provider(), algorithm="parallel", width=1, depth=1)
    with pytest.raises(ValueError, match="needs a node"):
        search.steer(Steer(SteerAction.IDEA, text="no node"))


async def test_the_score_moves_to_the_tpu_generation_the_engineer_chose(bench: Bench) -> None:
    search = bench.search(provider(), algorithm="parallel", width=1, depth=1)
    await search.run()
    assert all("on v5e" in n.score_kind for n in search.graph.in_order())
    session = search.base.session_id
    give(bench.store, session, Steer(SteerAction.TARGET, target="v6e"))

    resumed = bench.search(provider(), session_id=session)
    outcome = await resumed.run()
    accepted = [n for n in resumed.graph.in_order() if n.status == ACCEPTED]
    # the fake profile finds no tolerance's precision: scored against XLA as written, and said
    on_v6e = "estimated speedup vs XLA@1-pass (as written) on v6e"
    assert accepted and all(n.score_kind == on_v6e for n in accepted)
    assert outcome.score_kind == on_v6e and bench.store.best_kernel(session).score_kind == on_v6e
    assert all(n.model_target == "v6e" for n in accepted)  # the headroom is v6e's too
    (event,) = events(bench.store, session, Steered)
    assert event.round is None and event.words == "score on TPU v6e"


async def test_an_idea_at_a_rejected_node_is_kept_as_skipped_with_why(bench: Bench) -> None:
    roles = RoleProvider({"implementer": [variant(256), kernel(BAD), variant(512)]})
    search = bench.search(roles, algorithm="parallel", width=1, depth=1, debug_attempts=0)
    await search.run()
    rejected = next(n for n in search.graph.in_order() if n.status == REJECTED)
    search.steer(Steer(SteerAction.IDEA, node=rejected.ref, text=IDEA_TEXT))
    await search.run()

    assert not steered_nodes(search, IDEA)
    skipped = events(bench.store, search.base.session_id, StrategySkipped)
    assert [(e.node, e.strategy) for e in skipped] == [(rejected.ref, "steering idea")]
    assert f"#{rejected.number} has no accepted kernel to grow from (rejected)" in skipped[0].reason
