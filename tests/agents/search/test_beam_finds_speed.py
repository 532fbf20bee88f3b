"""The acceptance of a search that finds speed: a 6-evaluation beam search from the built-in
agent's seed on a multi-stage task (36k: a matmul, then a sigmoid and a row sum), every kernel
judged by the real harness (interpret-mode numerics at check shapes) and scored by the
performance model, improves the seed's estimate or says why the model sees no headroom.
benchmarks/beam_search.py runs the same search and prints its figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from maxkernel_tui.agents.builtin.provider import BuiltinProvider
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.graph import ACCEPTED, ROOT
from maxkernel_tui.agents.search.launch import open_search
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.store.db import Store

# the agent's jax worker and the real harness in worker processes: minutes
pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


async def test_a_six_evaluation_beam_from_the_seed_improves_the_estimate_or_says_why(
    store: Store, settings: Settings
) -> None:
    opened = await open_search(
        store,
        settings,
        task=load_task(builtin_suite_dir() / "36k_Matmul_Sigmoid_Sum"),
        config=SearchConfig(algorithm="beam", width=2, branches=2, depth=3, max_evals=6),
        provider=BuiltinProvider(),
    )
    service = opened.session.tools.service
    service.options = replace(service.options, seeds=1)  # the kernels differ by tiles only
    try:
        outcome = await opened.search.run()
    finally:
        await opened.aclose()
        opened.session.tools.close()
    graph = opened.search.graph
    seed = graph[ROOT]
    assert seed.status == ACCEPTED and seed.score is not None
    assert seed.score_kind.startswith("estimated speedup vs XLA@")  # what, against which XLA
    assert seed.roofline_share is not None and seed.bound  # the model's view of its headroom
    assert outcome.evaluations <= 6
    best = outcome.best
    assert best is not None and best.score is not None
    if "no headroom" in outcome.reason:
        assert outcome.reason.startswith("the seed is at ")
    else:
        assert best.score > seed.score, [
            (n.number, n.strategy, n.status, n.score, n.detail) for n in graph.in_order()
        ]
        assert best.score_kind == seed.score_kind
