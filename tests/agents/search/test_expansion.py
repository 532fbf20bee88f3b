"""Searches on fake tools (no jax, milliseconds): each algorithm expands to its evaluation budget,
ranks only accepted kernels, and keeps the store and the events in agreement; an expansion debugs
a rejected kernel; a cancelled search is marked stopped and resumes without redoing its nodes; a
judged node carries its verdict's evidence to the store, the events and the CLI's lines."""

from __future__ import annotations

import asyncio

import pytest

from maxkernel_tui.agents.orchestration.events import (
    EvaluationDone,
    ProposalRepeated,
    SearchNodeChanged,
    StrategySkipped,
)
from maxkernel_tui.agents.search.describe import describe_search
from maxkernel_tui.agents.search.expansion import Expansion, expand
from maxkernel_tui.agents.search.graph import ACCEPTED, FAILED, MERGED, REJECTED, STOPPED
from maxkernel_tui.kernels.report.checks import (
    PASS,
    TILES,
    VERIFIED_AT_PRODUCTION,
    Check,
    EvalReport,
)
from maxkernel_tui.kernels.report.reasons import Reason, TilesFigures
from tests.fakes.role_provider import RoleProvider
from tests.support.engine import (
    BAD,
    GOOD,
    Bench,
    FakeTools,
    accepted,
    by_block_rows,
    events,
    graph_from_events,
    graph_in_store,
    kernel,
    rejected,
    variant,
)

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize(
    "algorithm, shape, first, budget",
    [
        # the beam's first kernel fails TPU lowering and the debugger fixes it: two evaluations
        ("beam", {"width": 2, "branches": 2}, kernel(BAD), 3),
        ("parallel", {"width": 2}, variant(256), 2),
        ("evolve", {"population": 4, "islands": 2}, variant(256), 2),
    ],
    ids=["beam", "parallel", "evolve"],
)
async def test_a_search_runs_to_its_budget_and_ranks_only_accepted_kernels(
    bench: Bench, algorithm: str, shape: dict[str, int], first: str, budget: int
) -> None:
    provider = RoleProvider(
        {
            "implementer": [first, variant(128), variant(512), variant(64), variant(32)],
            "debugger": [kernel(GOOD)] * 4,
        }
    )
    search = bench.search(
        provider, algorithm=algorithm, depth=4, max_evals=budget, llm_concurrency=2, **shape
    )
    outcome = await search.run()

    store, session = bench.store, search.base.session_id
    assert outcome.reason == f"evaluation budget spent ({budget}/{budget})"
    assert len(events(store, session, EvaluationDone)) == budget == outcome.evaluations
    nodes = search.graph.in_order()
    assert nodes[0].status == ACCEPTED and nodes[0].evals == budget - 1
    assert any(n.status == STOPPED for n in nodes)  # a node that found no evaluation left
    ranked = search.graph.ranked()
    assert ranked and all(
        n.status == ACCEPTED and n.score_kind == outcome.score_kind for n in ranked
    )
    assert outcome.best is ranked[0] and "estimated" in outcome.score_kind
    assert not any(n.status == REJECTED for n in ranked)
    assert graph_from_events(store, session) == graph_in_store(store, session)
    assert store.session(session).status == "done"


@pytest.mark.parametrize("algorithm", ["parallel", "beam", "evolve"])
async def test_each_algorithm_grows_the_graph_round_by_round_to_its_depth(
    bench: Bench, algorithm: str
) -> None:
    rows = [8, 16, 32, 64, 128, 512, 1024, 2048, 4096, 8192] * 3
    provider = RoleProvider({"implementer": [variant(r) for r in [256, *rows]]})
    search = bench.search(provider, algorithm=algorithm, depth=2, width=2, population=2)
    outcome = await search.run()

    assert outcome.reason == "depth 2 reached"
    rounds = {n.round for n in search.graph.in_order()}
    assert rounds == {0, 1, 2}
    assert all(len(n.parents) >= 1 for n in search.graph.in_order() if n.round > 0)
    assert outcome.best is not None and outcome.best.status == ACCEPTED


async def test_an_expansion_debugs_what_the_harness_rejects(bench: Bench) -> None:
    provider = RoleProvider({"implementer": [kernel(BAD)], "debugger": [kernel(GOOD)]})
    engine = bench.engine(provider, mode="graph", max_debug_attempts=1)
    done = await expand(engine, "n4", "", "plan", "write a first kernel")
    assert done.verdict == "accepted" and done.source == GOOD and done.score == 1.0
    assert [e.step for e in events(bench.store, engine.session_id, EvaluationDone)] == [
        "n4/implement",
        "n4/debug1",
    ]
    assert "write a first kernel" in provider.prompts("implementer")[0]


async def test_an_expansion_that_stays_rejected_says_why(bench: Bench) -> None:
    tools = FakeTools(judge=lambda source, tools: rejected("numerics", "max error 3.0"))
    # the debugger can only repeat the rejected kernel: asked again, it has nothing new
    provider = RoleProvider({"implementer": [kernel(GOOD)], "debugger": [kernel(GOOD)] * 4})
    engine = bench.engine(provider, mode="graph", max_debug_attempts=1, tools=tools)
    done = await expand(engine, "n1", GOOD, "plan", "grow the blocks")
    assert isinstance(done, Expansion)
    assert done.verdict == "rejected" and done.score is None
    assert done.failure == "numerics: max error 3.0"
    assert tools.profiled == []  # a rejected kernel is not profiled
    assert tools.evaluated == [GOOD]  # judged once, however often it came back
    repeats = events(bench.store, engine.session_id, ProposalRepeated)
    assert [r.nothing_new for r in repeats] == [False, False, False, True]
    assert all("v1, rejected: numerics: max error 3.0" in r.rejection for r in repeats)


async def test_a_cancelled_search_is_stopped_and_resumes_without_redoing_nodes(
    bench: Bench,
) -> None:
    hanging = asyncio.Event()

    class Hangs(RoleProvider):
        """Answers the root and the first round's two nodes, then waits for ever."""

        async def stream(self, request):  # type: ignore[no-untyped-def]
            if len(self.requests) == 3:
                hanging.set()
                await asyncio.Event().wait()
            async for chunk in super().stream(request):
                yield chunk

    answers = {"implementer": [variant(r) for r in (256, 128, 512)]}
    search = bench.search(Hangs(answers), algorithm="parallel", width=2, depth=2)
    running = asyncio.create_task(search.run())
    await asyncio.wait_for(hanging.wait(), 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    store, session = bench.store, search.base.session_id
    assert store.session(session).status == "stopped"
    done_before = {n.ref for n in search.graph.in_order() if n.final}

    second = RoleProvider({"implementer": [variant(r) for r in (64, 32, 1024)]})
    resumed = bench.search(second, session_id=session, algorithm="parallel", width=2, depth=2)
    outcome = await resumed.run()

    assert outcome.reason == "depth 2 reached" and len(resumed.graph) == 5
    asked = len(second.requests)
    assert asked == 5 - len(done_before)  # one model call per node not finished before
    assert store.session(session).status == "done"


async def test_a_kernel_the_graph_has_is_merged_before_it_is_evaluated(bench: Bench) -> None:
    # The root writes GOOD; of its two children, one writes GOOD again and one a new kernel.
    provider = RoleProvider({"implementer": [kernel(GOOD), kernel(GOOD), variant(128)]})
    search = bench.search(provider, algorithm="parallel", width=2, depth=1, max_evals=10)
    await search.run()

    nodes = search.graph.in_order()
    merged = [n for n in nodes if n.status == MERGED]
    assert len(merged) == 1 and merged[0].merged_into == nodes[0].ref
    assert merged[0].evals == 0 and "(not evaluated)" in merged[0].detail
    assert len(events(bench.store, search.base.session_id, EvaluationDone)) == 2
    assert bench.tools.evaluated.count(GOOD) == 1  # the repeat never reached the harness


class RowMovesOnly(RoleProvider):
    """A provider that, like the built-in agent, says which strategies it cannot apply: here
    every one but the row-block moves."""

    def no_move(self, strategy: str, kernel: str) -> str | None:
        rows = ("grow-row-blocks", "shrink-row-blocks")
        return None if strategy in rows else f"no move for {strategy}"


async def test_a_strategy_without_a_move_is_skipped_before_it_costs_a_node(bench: Bench) -> None:
    provider = RowMovesOnly({"implementer": [variant(r) for r in (256, 512, 128, 1024, 64)]})
    search = bench.search(
        provider, moves=provider, algorithm="beam", width=1, branches=2, depth=2, max_evals=10
    )
    outcome = await search.run()

    store, session = bench.store, search.base.session_id
    grown = [n for n in search.graph.in_order() if n.round > 0]
    assert grown and {n.strategy for n in grown} <= {"grow-row-blocks", "shrink-row-blocks"}
    assert not [n for n in search.graph.in_order() if n.status == FAILED]
    skipped = events(store, session, StrategySkipped)
    assert skipped and all(s.reason == f"no move for {s.strategy}" for s in skipped)
    assert len({(s.node, s.strategy) for s in skipped}) == len(skipped)  # listed once each
    root = store.search_nodes(session)[0]
    assert [tuple(e) for e in root.data["extra"]["skipped"]] == [
        (s.node, s.strategy, s.reason) for s in skipped
    ]
    assert outcome.evaluations == len(bench.tools.evaluated) == 1 + len(grown)


async def test_a_beam_whose_grandchild_writes_the_roots_kernel_ends_by_itself(
    bench: Bench,
) -> None:
    # the 12p case through the runner: round 2 brings the root's kernel back; merged into the
    # root without an edge back to it, and the next round's planning returns
    answers = [variant(256), variant(512), variant(128), variant(256), variant(1024)]
    provider = RoleProvider({"implementer": answers + [variant(r) for r in (64, 32, 16, 8)]})
    search = bench.search(provider, algorithm="beam", width=1, branches=2, depth=3)
    outcome = await asyncio.wait_for(search.run(), 30)

    graph = search.graph
    back = next(n for n in graph.in_order() if n.round == 2 and n.merged_into == "n0")
    assert "same kernel as its ancestor #0" in back.detail
    assert graph["n0"].parents == []
    assert all(n.ref not in {a.ref for a in graph.ancestors(n.ref)} for n in graph.in_order())
    assert outcome.reason and bench.tools.evaluated.count(GOOD) == 1


def _with_evidence(source: str, tools: FakeTools) -> EvalReport:
    """The fake harness's verdict with what a real one rests on: seeds, held-out and, for an
    accepted kernel, production tiles sampled (the real report's `evidence` reads these)."""
    narrow = by_block_rows(source) == 0.5  # the 128-row variant
    judged = rejected("numerics", "max error 3.0") if narrow else accepted()
    judged.inputs = ["check seeds 11, 12 (rows 256)", "heldout seed 13 (rows 200)"]
    if judged.verdict == "accepted":
        sampled = TilesFigures("bench", 0, 7, 8, 128)
        judged.add(Check(TILES, PASS, Reason.TILES_SAMPLED, sampled))
    return judged


async def test_judged_nodes_carry_their_verdicts_evidence_to_the_events_and_the_cli(
    bench: Bench,
) -> None:
    tools = FakeTools(judge=_with_evidence)
    provider = RoleProvider({"implementer": [variant(256), variant(512)]})
    search = bench.search(
        provider, tools=tools, algorithm="parallel", width=1, depth=1, max_evals=2
    )
    await search.run()

    accepted_nodes = [n for n in search.graph.in_order() if n.status == ACCEPTED]
    assert len(accepted_nodes) == 2
    tiles_line = "production tiles (pass): 8 of 128 output blocks, sample seed 7, inputs seed 0"
    for node in accepted_nodes:
        assert node.scope == VERIFIED_AT_PRODUCTION
        assert node.evidence == [
            "check seeds 11, 12 (rows 256)",
            "heldout seed 13 (rows 200)",
            tiles_line,
        ]
    stored = bench.store.search_nodes(search.base.session_id)
    assert all(row.data["evidence"] for row in stored)  # kept for a view in another process
    judged = [
        e
        for e in events(bench.store, search.base.session_id, SearchNodeChanged)
        if e.status == ACCEPTED
    ]
    printed = describe_search(judged[-1]).splitlines()
    assert printed[0].startswith(f"◆ node #{judged[-1].number} accepted")
    assert printed[1:] == [
        f"    accepted, {VERIFIED_AT_PRODUCTION}",
        "    evidence: check seeds 11, 12 (rows 256)",
        "    evidence: heldout seed 13 (rows 200)",
        f"    evidence: {tiles_line}",
    ]


async def test_a_rejected_expansion_keeps_its_evidence_and_claims_no_scope(bench: Bench) -> None:
    tools = FakeTools(judge=_with_evidence)
    provider = RoleProvider({"implementer": [variant(128)], "debugger": [variant(128)] * 4})
    engine = bench.engine(provider, mode="graph", max_debug_attempts=1, tools=tools)
    done = await expand(engine, "n1", GOOD, "plan", "shrink the blocks")
    assert isinstance(done, Expansion) and done.verdict == "rejected"
    assert done.evidence == ("check seeds 11, 12 (rows 256)", "heldout seed 13 (rows 200)")
    assert done.scope == ""


async def test_a_node_pruned_while_it_is_evaluated_ends_pruned(bench: Bench) -> None:
    """The engineer prunes the node whose kernel is being judged: its accepted verdict comes
    back after the prune, and the node still ends pruned (never ✓, never the best)."""
    from maxkernel_tui.agents.search.graph import PRUNED

    searches = []

    def prune_while_judged(source: str, tools: FakeTools) -> EvalReport:
        (search,) = searches
        search.prune("n0")  # the root is running: its evaluation is under way
        return accepted()

    tools = FakeTools(judge=prune_while_judged)
    provider = RoleProvider({"implementer": [variant(256)]})
    search = bench.search(provider, tools=tools, algorithm="parallel", width=1, depth=1)
    searches.append(search)
    outcome = await search.run()
    root = search.graph["n0"]
    assert root.status == PRUNED and root.pruned_round is not None
    assert "pruned while it ran" in root.detail
    assert outcome.best is None
