"""Open a search, new or resumed: a Graph-mode session (store row, journal, provider, budget,
tools) with the search's graph, caps and algorithm around it. A new search stores its settings
with its root node at once, so a search killed at any moment can be resumed with them."""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.orchestration.engine import LoopLimits, SessionEngine
from maxkernel_tui.agents.orchestration.events import EvaluationDone
from maxkernel_tui.agents.orchestration.gates import AutoGate
from maxkernel_tui.agents.orchestration.journal import Listener
from maxkernel_tui.agents.orchestration.session import OpenSession, end_unopened, open_session
from maxkernel_tui.agents.search.algorithms import Algorithm, Beam, MoveCheck, Moves, Parallel
from maxkernel_tui.agents.search.config import SearchConfig, StoredSearch, stored_search
from maxkernel_tui.agents.search.evolve import Evolve
from maxkernel_tui.agents.search.graph import ROOT, SearchGraph
from maxkernel_tui.agents.search.limits import CappedTools, GatedClient
from maxkernel_tui.agents.search.runner import Search, root_plan
from maxkernel_tui.agents.strategies import applicable
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.service.setup import EvaluationSetup
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import Mode


@dataclass
class OpenSearch:
    search: Search
    session: OpenSession

    @property
    def session_id(self) -> str:
        return self.session.session_id

    async def aclose(self) -> None:
        await self.session.aclose()


def algorithm_for(config: SearchConfig, family: str, moves: Moves | None = None) -> Algorithm:
    strategies = applicable(family)
    if config.algorithm == "parallel":
        return Parallel(config, strategies, moves)
    if config.algorithm == "beam":
        return Beam(config, strategies, moves)
    return Evolve(config, strategies, moves)


def search_limits(config: SearchConfig) -> LoopLimits:
    """The limits of a search's engine: one line of work per expansion, no autotune."""
    return LoopLimits(
        max_iterations=1,
        tune_candidates=0,
        max_debug_attempts=config.debug_attempts,
        rank_by=config.rank_by,
    )


async def open_search(
    store: Store,
    settings: Settings,
    *,
    task: Task | None = None,
    config: SearchConfig | None = None,
    resume: str | None = None,
    seed: str = "",
    provider: Provider | None = None,
    listener: Listener | None = None,
    setup: EvaluationSetup | None = None,
) -> OpenSearch:
    """A new search on `task` with `config` (from `seed`, a kernel source, when given), or the
    search `resume` names, with its stored settings; `setup`: as `open_session` takes it."""
    config = config or SearchConfig()
    opened = await open_session(
        store,
        settings,
        task=task,
        mode=Mode.GRAPH,
        gates=lambda mode: AutoGate(),
        limits=search_limits(config),
        resume=resume,
        provider=provider,
        listener=listener,
        setup=setup,
    )
    try:
        # an agent that knows which strategies it cannot apply: they are skipped, not tried
        check = opened.provider if isinstance(opened.provider, MoveCheck) else None
        search = search_on(
            opened.engine,
            config,
            seed,
            resumed=resume is not None,
            slots=opened.tools.slots,
            moves=check,
        )
    except BaseException as error:
        await opened.aclose()
        if resume is None:  # a new search that never ran: ended now, never left active
            end_unopened(opened.engine.journal, error)
        raise
    return OpenSearch(search, opened)


def search_on(
    engine: SessionEngine,
    config: SearchConfig,
    seed: str = "",
    *,
    resumed: bool = False,
    slots: int = 1,
    moves: MoveCheck | None = None,
) -> Search:
    """The search of `engine`'s Graph session: a new one with `config` from `seed`, or, when
    `resumed`, the stored one with its own settings (a ValueError if the session has none).
    `slots`: evaluations the tools run at once (a cluster's): the search keeps them all busy.
    `moves`: the agent's own word on which strategies it cannot apply to a kernel."""
    graph = SearchGraph(engine.journal)
    if resumed:
        stored = stored_search(graph.extra)
        if stored is None:
            raise ValueError(
                f"session {engine.session_id} is not a graph search; resume it with `run --resume`"
            )
        config, seed = stored.config, stored.seed
    else:
        plan = root_plan(seed)
        graph.ensure(
            ROOT,
            number=0,
            round_=0,
            parents=[],
            strategy=plan.strategy,
            plan=plan.plan,
            extra=StoredSearch(config, seed).to_json(),
        )
    spent = sum(isinstance(e, EvaluationDone) for e in engine.journal.history())
    return Search(
        base=engine,
        config=config,
        graph=graph,
        algorithm=algorithm_for(config, engine.task.category, Moves(moves)),
        client=GatedClient(engine.client, config.llm_concurrency),
        tools=CappedTools(
            engine.tools, max(config.eval_concurrency, slots), config.max_evals, spent
        ),
        seed=seed,
    )
