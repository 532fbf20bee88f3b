"""The graph and the algorithms without the harness: judged nodes are set by hand. Merging,
pruning, ranking by one score kind, exports, and planning that a resume replays identically."""

from __future__ import annotations

import json

import pytest

from maxkernel_tui.agents.orchestration.fingerprint import kernel_hash
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.search.algorithms import Beam, Moves, Parallel, path_strategies
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.evolve import Evolve
from maxkernel_tui.agents.search.export import to_dot, to_json
from maxkernel_tui.agents.search.graph import (
    ACCEPTED,
    MERGED,
    PRUNED,
    REJECTED,
    ROOT,
    SearchGraph,
)
from maxkernel_tui.agents.strategies import applicable
from maxkernel_tui.commands.search import summary_table
from maxkernel_tui.store.db import Store
from tests.support.engine import GOOD, graph_from_events, graph_in_store

ESTIMATED = "estimated speedup vs XLA on v5e (model)"


@pytest.fixture
def db(tmp_path):
    with Store(tmp_path / "s.db") as opened:
        yield opened


def new_graph(db: Store) -> SearchGraph:
    session = db.create_session("12p_RMSNorm", "graph")
    graph = SearchGraph(Journal(db, session.id))
    graph.ensure(
        ROOT, number=0, round_=0, parents=[], strategy="initial", plan="first", extra={"config": {}}
    )
    return graph


def judge(
    graph: SearchGraph,
    ref: str,
    status: str,
    score: float | None,
    source: str,
    kind: str = ESTIMATED,
) -> None:
    # as an expansion leaves it: the verdict and the score in the store, then the node
    version = graph.store.add_kernel_version(graph.session_id, source)
    graph.store.record_evaluation(version.id, {"verdict": status})
    if score is not None:
        graph.store.record_score(version.id, score, kind)
    graph.update(
        graph[ref],
        status,
        score=score,
        score_kind=kind if score is not None else "",
        version_id=version.id,
        source=source,
        hash=kernel_hash(source),
    )


def child(
    graph: SearchGraph, number: int, parent: str, round_: int = 1, strategy: str = "s", **tags
) -> str:
    ref = f"n{number}"
    graph.ensure(
        ref,
        number=number,
        round_=round_,
        parents=[parent],
        strategy=strategy,
        plan=strategy,
        tags=tags,
    )
    return ref


def test_fingerprint_ignores_comments_and_layout() -> None:
    assert kernel_hash("x = 1  # one\n\n\ny = 2\n") == kernel_hash("x = 1\ny = 2\n")
    assert kernel_hash("if a:\n    b = 1\n") == kernel_hash("if a:\n  b = 1  # two spaces\n")
    assert kernel_hash("x = 1\n") != kernel_hash("x = 2\n")


def test_ranking_never_takes_a_rejected_kernel_nor_another_kind(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    judge(graph, child(graph, 1, ROOT), REJECTED, None, GOOD + "\n# bad\nz = 1\n")
    judge(
        graph,
        child(graph, 2, ROOT),
        ACCEPTED,
        9.0,
        GOOD + "\nw = 2\n",
        kind="measured speedup vs XLA on v5e",
    )
    judge(graph, child(graph, 3, ROOT), ACCEPTED, 1.5, GOOD + "\nv = 3\n")
    assert [n.ref for n in graph.ranked()] == [
        "n3",
        ROOT,
    ]  # the measured 9.0 is not compared with estimates
    best = graph.store.best_kernel(graph.session_id)  # the store's one rule says the same
    assert best is not None and graph.holding(best.version.id) is graph["n3"]


def test_identical_kernels_merge_into_one_node_with_both_parents(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    a, b = child(graph, 1, ROOT), child(graph, 2, ROOT)
    judge(graph, a, ACCEPTED, 1.2, GOOD + "\nx = 1\n")
    judge(graph, b, ACCEPTED, 1.2, GOOD + "\n\nx = 1  # the same kernel\n")
    c = child(graph, 3, a, round_=2)
    judge(graph, c, ACCEPTED, 1.3, GOOD + "\nx = 1\ny = 1\n")
    d = child(graph, 4, b, round_=2)
    judge(graph, d, ACCEPTED, 1.3, GOOD + "\nx = 1\ny = 1\n")
    graph.merge_duplicates([graph[a], graph[b]])
    graph.merge_duplicates([graph[c], graph[d]])
    assert graph[b].status == MERGED and graph[b].merged_into == a
    assert graph[d].status == MERGED and graph[c].parents == [a, b]
    assert [n.ref for n in graph.ranked()] == [c, a, ROOT]
    assert graph_from_events(db, graph.session_id) == graph_in_store(db, graph.session_id)


def test_prune_drops_pending_descendants_and_stops_growth(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    a = child(graph, 1, ROOT)
    judge(graph, a, ACCEPTED, 1.1, GOOD + "\na = 1\n")
    below = child(graph, 2, a, round_=2)
    pruned = graph.prune(a, 2)
    assert [n.ref for n in pruned] == [a, below] and graph[below].status == PRUNED
    assert graph.growable(graph[a], 2) and not graph.growable(
        graph[a], 3
    )  # its own round still plans it
    assert graph_from_events(db, graph.session_id) == graph_in_store(db, graph.session_id)


def test_a_reloaded_graph_is_the_stored_one_and_plans_the_same_round(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    strategies = applicable("norm")
    config = SearchConfig(algorithm="beam", width=2, branches=2)
    first = Beam(config, strategies).plan_round(graph, 1)
    for i, plan in enumerate(first, start=1):
        graph.ensure(
            f"n{i}",
            number=i,
            round_=1,
            parents=list(plan.parents),
            strategy=plan.strategy,
            plan=plan.plan,
        )
    judge(graph, "n1", ACCEPTED, 0.5, GOOD + "\nq = 1\n")  # a regression: the gate keeps it out
    judge(graph, "n2", ACCEPTED, 1.4, GOOD + "\nq = 2\n")
    beam = Beam(config, strategies)
    assert [p.strategy for p in beam.plan_round(graph, 1)] == [p.strategy for p in first]
    second = beam.plan_round(graph, 2)
    assert {p.parents for p in second} == {("n2",)}  # only the child that improved grows
    assert not {p.strategy for p in second} & {
        "initial",
        first[1].strategy,
    }  # nothing tried on its path again
    again = SearchGraph(Journal(db, graph.session_id))
    assert [(n.ref, n.status, n.score, n.source) for n in again.in_order()] == [
        (n.ref, n.status, n.score, n.source) for n in graph.in_order()
    ]
    assert Beam(config, strategies).plan_round(again, 1) == first


def test_parallel_lines_and_evolution_with_crossover(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    strategies = applicable("norm")
    lines = Parallel(SearchConfig(algorithm="parallel", width=3), strategies).plan_round(graph, 1)
    assert [p.tags["line"] for p in lines] == [0, 1, 2] and len({p.strategy for p in lines}) == 3
    evolve = Evolve(SearchConfig(algorithm="evolve", population=4, islands=2), strategies)
    gen1 = evolve.plan_round(graph, 1)
    assert [p.tags["island"] for p in gen1] == [0, 0, 1, 1] and all(
        p.parents == (ROOT,) for p in gen1
    )
    for i, plan in enumerate(gen1, start=1):
        graph.ensure(
            f"n{i}",
            number=i,
            round_=1,
            parents=list(plan.parents),
            strategy=plan.strategy,
            plan=plan.plan,
            tags=plan.tags,
        )
        judge(graph, f"n{i}", ACCEPTED, 1.0 + i / 10, GOOD + f"\nk = {i}\n")
    gen2 = evolve.plan_round(graph, 2)
    crossovers = [p for p in gen2 if p.strategy == "crossover"]
    assert len(crossovers) == 2 and all(len(p.parents) == 2 for p in crossovers)
    a, b = (graph[r] for r in crossovers[0].parents)
    assert a.source in crossovers[0].instruction and b.source in crossovers[0].instruction


def test_exports(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    judge(graph, child(graph, 1, ROOT, strategy="whole-rows"), REJECTED, None, GOOD + "\nr = 1\n")
    dot = to_dot(graph)
    assert dot.startswith("digraph search {") and "n0 -> n1;" in dot and "#1 ✗ whole-rows" in dot
    document = json.loads(to_json(graph))
    assert document["best"] == ROOT and [n["status"] for n in document["nodes"]] == [
        ACCEPTED,
        REJECTED,
    ]


def test_hostile_text_in_a_node_is_inert_in_the_json_and_the_dot(db) -> None:
    from tests.support.hostile_text import HOSTILE, live_controls

    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    judge(graph, child(graph, 1, ROOT, strategy=HOSTILE), REJECTED, None, GOOD + "\nr = 1\n")
    exported = to_json(graph)
    assert live_controls(exported) == [] and not set(exported) - set(map(chr, range(128)))
    assert json.loads(exported)["nodes"][1]["strategy"] == HOSTILE  # escaped, not lost
    dot = to_dot(graph)
    assert live_controls(dot) == [] and "\\x1b]52;c;" in dot


def test_suite_summary_table() -> None:
    table = summary_table([["12p_RMSNorm", "abc", "3", "3", "1.21", ESTIMATED]])
    header, row = table.splitlines()
    assert header.split() == ["task", "session", "nodes", "evals", "best", "kind"]
    assert row.startswith("12p_RMSNorm  abc")


def test_a_grandchild_back_at_the_roots_kernel_merges_without_a_cycle(db) -> None:
    # The 12p beam case: n3, a child of n2 (a child of the root), wrote the root's kernel again.
    # The merge once gave the root the parent n2, and the walk to the root never ended.
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    a = child(graph, 1, ROOT, strategy="grow-row-blocks")
    b = child(graph, 2, ROOT, strategy="shrink-row-blocks")
    judge(graph, a, ACCEPTED, 2.0, GOOD + "\nx = 1\n")
    judge(graph, b, ACCEPTED, 0.5, GOOD + "\nx = 2\n")
    back = child(graph, 3, b, round_=2, strategy="grow-row-blocks")
    judge(graph, back, ACCEPTED, 1.0, GOOD + "\n# the root's kernel, commented\n")
    graph.merge_duplicates([graph[back]])

    assert graph[back].status == MERGED and graph[back].merged_into == ROOT
    assert graph[ROOT].parents == []  # never a child of its own grandchild
    assert "same kernel as its ancestor #0" in graph[back].detail
    for node in graph.in_order():
        assert node.ref not in {n.ref for n in graph.ancestors(node.ref)}
    assert path_strategies(graph, graph[b], 3) == {
        "initial",
        "shrink-row-blocks",
        "grow-row-blocks",
    }
    config = SearchConfig(algorithm="beam", width=2, branches=2)
    beam = Beam(config, applicable("norm"))
    assert beam.plan_round(graph, 3)  # plans, and returns
    assert graph_from_events(db, graph.session_id) == graph_in_store(db, graph.session_id)


def test_a_cycle_stored_by_an_older_release_still_ends_every_walk(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    a = child(graph, 1, ROOT)
    judge(graph, a, ACCEPTED, 1.1, GOOD + "\nx = 1\n")
    b = child(graph, 2, a, round_=2, strategy="t")
    judge(graph, b, ACCEPTED, 1.2, GOOD + "\nx = 2\n")
    graph.update(graph[ROOT], ACCEPTED, why="old merge", parents=[b])  # the old bug's edge
    reloaded = SearchGraph(Journal(db, graph.session_id))

    assert [n.ref for n in reloaded.first_parent_line(b)] == [b, a, ROOT]
    assert {n.ref for n in reloaded.ancestors(ROOT)} == {a, b}  # visited once each
    assert path_strategies(reloaded, reloaded[b], 3) == {"initial", "s", "t"}
    assert Beam(SearchConfig(width=1, branches=1), applicable("norm")).plan_round(reloaded, 3)


def test_a_child_of_another_line_with_an_earlier_kernel_still_joins_its_parents(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    a, b = child(graph, 1, ROOT), child(graph, 2, ROOT)
    judge(graph, a, ACCEPTED, 1.5, GOOD + "\nx = 1\n")
    judge(graph, b, ACCEPTED, 1.2, GOOD + "\nx = 2\n")
    c = child(graph, 3, b, round_=2)  # from b's line, it reaches a's kernel: not its ancestor
    judge(graph, c, ACCEPTED, 1.5, GOOD + "\nx = 1\n")
    graph.merge_duplicates([graph[c]])
    assert graph[a].parents == [ROOT, b] and graph[c].detail == "same kernel as #1"


class TwoMoves:
    def no_move(self, strategy: str, kernel: str) -> str | None:
        return None if strategy in ("grow-row-blocks", "shrink-row-blocks") else "no move"


def test_the_beam_never_plans_an_expansion_it_already_made(db) -> None:
    # both moves the agent has were tried from the root and did worse: the beam keeps the root
    # and has nothing new to grow from it, so the search can end instead of repeating them
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    judge(graph, child(graph, 1, ROOT, strategy="grow-row-blocks"), ACCEPTED, 0.9, GOOD + "\na=1\n")
    judge(
        graph, child(graph, 2, ROOT, strategy="shrink-row-blocks"), ACCEPTED, 0.8, GOOD + "\nb=1\n"
    )
    moves = Moves(TwoMoves())
    beam = Beam(SearchConfig(width=1, branches=2), applicable("norm"), moves)
    assert beam.plan_round(graph, 2) == []
    assert {s.strategy for s in moves.skipped.values()} == {s.name for s in applicable("norm")} - {
        "grow-row-blocks",
        "shrink-row-blocks",
    }


def test_evolution_makes_no_crossover_an_agent_cannot_write(db) -> None:
    graph = new_graph(db)
    judge(graph, ROOT, ACCEPTED, 1.0, GOOD)
    moves = Moves(TwoMoves())  # grow and shrink row blocks only: no crossover
    config = SearchConfig(algorithm="evolve", population=4, islands=2)
    evolve = Evolve(config, applicable("norm"), moves)
    for i, plan in enumerate(evolve.plan_round(graph, 1), start=1):
        graph.ensure(
            f"n{i}",
            number=i,
            round_=1,
            parents=list(plan.parents),
            strategy=plan.strategy,
            plan=plan.plan,
            tags=plan.tags,
        )
        judge(graph, f"n{i}", ACCEPTED, 1.0 + i / 10, GOOD + f"\nk = {i}\n")
    gen2 = evolve.plan_round(graph, 2)
    assert gen2 and {p.strategy for p in gen2} <= {"grow-row-blocks", "shrink-row-blocks"}
    assert "crossover" in {s.strategy for s in moves.skipped.values()}
