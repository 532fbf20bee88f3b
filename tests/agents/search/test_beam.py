"""The beam search as a search that finds speed, on fake tools (no jax, milliseconds): the real
strategy moves of the built-in agent change a kernel's tunables, a fake performance model scores
them with a roofline share and a bound. Where the model sees headroom the beam explores and
improves the estimate; where the seed is at its roofline it stops after the root and says why;
the strategies that matter for a node's bound are tried first."""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace

import pytest

from maxkernel_tui.agents.builtin.strategy_moves import NOT_A_CHANGE, apply_strategy, no_move
from maxkernel_tui.agents.llm.types import Finish, Request, TextDelta, TokenCount
from maxkernel_tui.agents.orchestration.fingerprint import kernel_hash
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.roles.tunables import find_tunables
from maxkernel_tui.agents.search.algorithms import Beam, Moves
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.graph import ACCEPTED, ROOT, SearchGraph
from maxkernel_tui.agents.search.headroom import model_view, no_headroom
from maxkernel_tui.agents.strategies import FOR_BOUND, applicable, for_bound
from maxkernel_tui.kernels.perf.analysis import Bound
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.service.service import KernelSource, ProfileResult
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store
from tests.fakes.role_provider import NO_EDGE_CASES
from tests.support.engine import TARGET, Bench, FakeTools, kernel, rmsnorm_task

REFERENCE_S = 1e-3  # XLA's time for the task, as the fake model has it


class MovingAgent:
    """An implementer that makes the built-in agent's real move for each strategy on the parent
    kernel (the seed at the root), and says which strategies it has no move for."""

    name = "moves"
    model = "fake-model"

    def __init__(self, seed: str) -> None:
        self.seed = seed

    async def aclose(self) -> None:
        return None

    async def stream(
        self, request: Request
    ) -> AsyncGenerator[TextDelta | TokenCount | Finish, None]:
        context = request.context or {}
        if context.get("role") == "tester":
            text = NO_EDGE_CASES
        else:
            strategy, parent = context.get("strategy") or "", context.get("kernel") or self.seed
            moved = strategy not in NOT_A_CHANGE
            text = kernel(apply_strategy(parent, strategy)[0] if moved else self.seed)
        yield TextDelta(text)
        yield TokenCount(prompt_tokens=10, completion_tokens=10)
        yield Finish("stop")

    def no_move(self, strategy: str, source: str) -> str | None:
        return no_move(source, strategy)


GEMM = """\
# Tunables: preferred block sizes.
BLOCK_ROWS = 256
BLOCK_COLS = 512
BLOCK_DEPTH = 512


def computation(x, w):
    return _matmul_stage(x, w, operands='bf16')
"""


@dataclass
class ModelTools(FakeTools):
    """Fake tools for a matmul task whose profiles come from a model of the block sizes: each
    halving or doubling away from `best` (rows, cols, depth) costs a fifth of the roofline
    `floor_s`; a kernel with smaller row blocks than the best is overhead-bound."""

    task: Task = field(default_factory=lambda: replace(rmsnorm_task(), category="kb-gemm"))
    best: tuple[int, int, int] = (1024, 1024, 1024)
    floor_s: float = 4e-4

    def seconds(self, source: str) -> float:
        sizes = find_tunables(source)
        names = ("BLOCK_ROWS", "BLOCK_COLS", "BLOCK_DEPTH")
        off = sum(abs(math.log2(sizes[n] / b)) for n, b in zip(names, self.best))
        return self.floor_s * (1.0 + 0.2 * off)

    async def profile(self, kernel: KernelSource, *, estimate_only: bool = False) -> ProfileResult:
        self.profiled.append((kernel.text, estimate_only))
        overhead = find_tunables(kernel.text)["BLOCK_ROWS"] < self.best[0]
        estimate = _estimate(self.seconds(kernel.text), self.floor_s, overhead)
        return ProfileResult(ProfileSummary("36k", "kernel.py", "bench", [], [estimate], {}, {}))


def _estimate(seconds: float, roofline_s: float, overhead: bool) -> Estimate:
    return Estimate(
        target=TARGET,
        kind="estimated",
        seconds=seconds,
        bound=Bound.OVERHEAD if overhead else Bound.MEMORY,
        transfer_seconds=roofline_s,
        compute_seconds=roofline_s / 10,
        overhead_seconds=seconds - roofline_s,
        hbm_bytes=1 << 20,
        flops=1e6,
        vmem_bytes=1 << 20,
        vmem_capacity=16 << 20,
        fits_vmem=True,
        roofline_seconds=roofline_s,
        roofline_share=roofline_s / seconds,
        reference_seconds=REFERENCE_S,
        speedup=REFERENCE_S / seconds,
        dispatch_seconds=0.0,  # `seconds` here is the kernel's alone
    )


@pytest.mark.asyncio
async def test_a_six_evaluation_beam_from_a_seed_with_headroom_improves_its_estimate(
    bench: Bench,
) -> None:
    tools = ModelTools()
    agent = MovingAgent(GEMM)  # four halvings or doublings from the model's best
    search = bench.search(
        agent,
        tools=tools,
        moves=agent,
        algorithm="beam",
        width=2,
        branches=2,
        depth=3,
        max_evals=6,
    )
    outcome = await search.run()
    nodes = search.graph.in_order()
    root = nodes[0]
    assert outcome.evaluations == 6 and len(tools.evaluated) == 6
    assert root.roofline_share == pytest.approx(1 / 1.8) and root.bound == Bound.OVERHEAD
    assert root.detail == "56% of roofline on v5e, overhead-bound (estimated)"
    assert outcome.best is not None and outcome.best.score is not None and root.score is not None
    assert outcome.best.score > root.score  # the estimate improved
    assert tools.seconds(outcome.best.source) < tools.seconds(GEMM)
    assert outcome.best.score_kind == "estimated speedup vs XLA@1-pass (as written) on v5e"
    # the overhead-bound seed is grown by the strategies that cut steps, first
    first_round = [n.strategy for n in nodes if n.round == 1]
    assert first_round == ["fewer-grid-steps", "grow-row-blocks"]


@pytest.mark.asyncio
async def test_a_seed_at_its_roofline_is_not_expanded_and_the_search_says_why(
    bench: Bench,
) -> None:
    tools = ModelTools(best=(256, 512, 512), floor_s=4e-4)
    tools.seconds = lambda source: 4e-4 / 0.97  # type: ignore[method-assign]
    agent = MovingAgent(GEMM)
    search = bench.search(
        agent,
        tools=tools,
        moves=agent,
        algorithm="beam",
        width=2,
        branches=2,
        depth=3,
        max_evals=6,
    )
    outcome = await search.run()
    assert outcome.reason == (
        "the seed is at 97% of roofline plus dispatch on v5e (estimated): no headroom the model "
        "can see "
        "(the search's floor is 95%)"
    )
    assert outcome.evaluations == 1 and len(search.graph) == 1
    assert outcome.best is not None and outcome.best.ref == ROOT


@pytest.mark.asyncio
async def test_a_floor_above_one_expands_even_a_seed_at_its_roofline(bench: Bench) -> None:
    tools = ModelTools(best=(256, 512, 512), floor_s=4e-4)
    agent = MovingAgent(GEMM)
    search = bench.search(
        agent,
        tools=tools,
        moves=agent,
        algorithm="beam",
        width=1,
        branches=1,
        depth=1,
        headroom_floor=1.01,
    )
    outcome = await search.run()
    assert outcome.evaluations == 2 and outcome.reason == "depth 1 reached"


def test_no_headroom_needs_a_share_at_the_floor() -> None:
    assert no_headroom(0, None, "v5e", "estimated", 0.95) is None  # the model said nothing
    assert no_headroom(3, 0.9, "v5e", "estimated", 0.95) is None
    words = no_headroom(3, 0.99, "v6e", "calibrated", 0.95)
    assert words is not None
    assert words.startswith("#3 is at 99% of roofline plus dispatch on v6e (calibrated)")


def test_headroom_is_judged_against_the_roofline_plus_the_dispatch_every_kernel_pays() -> None:
    # 36k's seed as the model sees it: 2.79 ms of MXU roofline, 0.1 ms of dispatch, 3.03 ms in all
    estimate = replace(_estimate(3.03e-3, 2.79e-3, False), dispatch_seconds=1e-4)
    summary = ProfileSummary("36k", "kernel.py", "bench", [], [estimate], {}, {})
    view = model_view(summary, TARGET)
    assert view is not None and view.roofline_share == pytest.approx(0.921, abs=1e-3)
    assert view.reachable_share == pytest.approx(0.954, abs=1e-3)
    assert no_headroom(0, view.roofline_share, TARGET, "estimated", 0.95) is None
    assert no_headroom(0, view.reachable_share, TARGET, "estimated", 0.95) is not None
    no_roofline = replace(estimate, roofline_seconds=None, roofline_share=None)
    summary = ProfileSummary("36k", "kernel.py", "bench", [], [no_roofline], {}, {})
    view = model_view(summary, TARGET)
    assert view is not None and view.reachable_share is None  # nothing to judge by


def test_the_strategies_that_matter_for_a_bound_come_first() -> None:
    library = applicable("kb-gemm")
    ordered = [s.name for s in for_bound(library, "compute")]
    matter = [n for n in FOR_BOUND[Bound.COMPUTE] if n in {s.name for s in library}]
    assert ordered[: len(matter)] == matter
    assert [s.name for s in for_bound(library, "")] == [s.name for s in library]  # unknown bound
    assert sorted(ordered) == sorted(s.name for s in library)  # reordered, nothing lost


def test_a_compute_bound_matmul_is_planned_with_compute_moves_it_can_make(tmp_path) -> None:
    source = (
        "# Tunables: preferred block sizes.\nBLOCK_ROWS = 1024\nBLOCK_COLS = 2048\n"
        "BLOCK_DEPTH = 512\n\n\ndef computation(x, w):\n"
        "    return _matmul_stage(x, w, operands='bf16')\n"
    )
    with Store(tmp_path / "s.db") as db:
        graph = SearchGraph(Journal(db, db.create_session("36k", "graph").id))
        root = graph.ensure(ROOT, number=0, round_=0, parents=[], strategy="initial", plan="p")
        version = db.add_kernel_version(graph.session_id, source)
        graph.update(
            root,
            ACCEPTED,
            score=0.98,
            score_kind="estimated speedup vs XLA on v5e",
            version_id=version.id,
            source=source,
            hash=kernel_hash(source),
            roofline_share=0.87,
            bound="compute",
            model_target="v5e",
            model_basis="estimated",
        )
        moves = Moves(MovingAgent(source))
        beam = Beam(SearchConfig(width=1, branches=3), applicable("kb-gemm"), moves)
        planned = [p.strategy for p in beam.plan_round(graph, 1)]
    # bf16-operands first for a compute-bound kernel, but every matmul already states it
    assert planned == ["whole-k", "shrink-col-blocks", "grow-depth-blocks"]
    assert "already states its operand precision" in moves.skipped[(ROOT, "bf16-operands")].reason


def test_a_search_stored_before_the_headroom_floor_resumes_with_the_default() -> None:
    stored = SearchConfig(algorithm="beam", max_evals=5).to_json()
    del stored["headroom_floor"]  # as an older release wrote it
    assert SearchConfig.from_json(stored).headroom_floor == 0.95
