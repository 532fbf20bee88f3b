"""Engine tests without jax: `FakeTools` (scripted evaluation reports and profiles, in this
process), engines and searches built on a real store with an in-process provider, the gates
tests steer them with, and the kernels and answers the engine tests share (the slow tests with
the real harness use the same ones)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from maxkernel_tui.agents.budget import Budget
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.orchestration.engine import LoopLimits, SessionEngine
from maxkernel_tui.agents.orchestration.events import SearchNodeChanged, SessionEvent, decode
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    AutoGate,
    Decider,
    Decision,
    Gate,
    Proposal,
)
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.orchestration.workspace import Workspace
from maxkernel_tui.agents.roles.tunables import find_tunables, set_tunables
from maxkernel_tui.agents.search.algorithms import MoveCheck
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.launch import search_limits, search_on
from maxkernel_tui.agents.search.runner import Search
from maxkernel_tui.agents.tools.assignment import RolePlan
from maxkernel_tui.agents.tools.jax_api import JaxApi, LookupFailed
from maxkernel_tui.agents.tools.runner import Toolbox
from maxkernel_tui.kernels.edge_configs import EdgeConfig
from maxkernel_tui.kernels.evaluation.harness import Probe
from maxkernel_tui.kernels.loader import builtin_suite_dir, load_task
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import FAIL, PASS, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import Agreement, Comparison, Reason, RunFigures, Said
from maxkernel_tui.kernels.service.service import CheckListener, KernelSource, ProfileResult
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store

KERNELS = Path(__file__).parents[1] / "data" / "kernels" / "agent"
GOOD = (KERNELS / "rmsnorm_tunable.py").read_text()
BAD = (KERNELS / "rmsnorm_bad_block.py").read_text()
CHUNKED = (KERNELS / "rmsnorm_fixed_chunk.py").read_text()  # right on the task's own shapes
DIAGNOSIS = "Memory-bound at the estimated share of roofline.\nNext: larger row blocks.\n"
TARGET = "v5e"


def plan(note: str = "") -> str:
    return (
        f"Row blocks of BLOCK_ROWS rows with the full hidden dimension. {note}\n\n"
        "## Tiling\nRows in blocks of 256, hidden 8192 whole.\n\n"
        "## Grid\n(rows // 256,), parallel.\n\n"
        "## Memory\nx block in VMEM, double-buffered: 2 x 256 x 8192 x 2 B.\n\n"
        "## Expected bound\nMemory: one read and one write of x.\n"
    )


def kernel(source: str) -> str:
    return f"Here is the kernel.\n```python\n{source}```\n"


def variant(rows: int) -> str:
    """The good kernel with another row block: another kernel, another estimate."""
    return kernel(set_tunables(GOOD, {"BLOCK_ROWS": rows}))


def rmsnorm_task() -> Task:
    return load_task(builtin_suite_dir() / "12p_RMSNorm")


# -- scripted results ---------------------------------------------------------------------------


CLOSE = Comparison(True, 1e-6, 1e-6, 0.01, (0,), 0, 128)  # an accepted kernel's numerics
WITHIN, WORDS = Reason.WITHIN_TOLERANCE, Reason.WORDS_ONLY


def report(*checks: Check) -> EvalReport:
    return EvalReport("12p_RMSNorm", "kernel.py", [TARGET], "fake", list(checks))


def accepted() -> EvalReport:
    within = Agreement((RunFigures("check", 1, 1e-3, 1e-3, CLOSE),))
    return report(Check("static", PASS, Reason.STATIC_OK), Check("numerics", PASS, WITHIN, within))


def rejected(
    check: str = "tpu_lower", detail: str = "block (12, 8192) is not a multiple of 8"
) -> EvalReport:
    """A rejection at `check`, known by its words only (a scripted one)."""
    return report(Check("static", PASS, Reason.STATIC_OK), Check(check, FAIL, WORDS, Said(detail)))


def summary(speedup: float | None, target: str = TARGET) -> ProfileSummary:
    """A profile whose only estimate (on `target`) has `speedup`."""
    estimate = Estimate(
        target=target,
        kind="estimated",
        seconds=1e-4,
        bound="memory",
        transfer_seconds=1e-4,
        compute_seconds=1e-5,
        overhead_seconds=1e-6,
        hbm_bytes=1 << 20,
        flops=1e6,
        vmem_bytes=1 << 20,
        vmem_capacity=16 << 20,
        fits_vmem=True,
        roofline_seconds=5e-5,
        roofline_share=0.5,
        reference_seconds=None if speedup is None else 1e-4 * speedup,
        speedup=speedup,
        dispatch_seconds=0.0,  # `seconds` is the kernel's alone: half its roofline, headroom left
    )
    return ProfileSummary("12p_RMSNorm", "kernel.py", "bench", [], [estimate], {}, {})


def by_block_rows(source: str) -> float | None:
    """The fake performance model: a kernel is as fast as its row block is large (BLOCK_ROWS
    256 is 1.0); a kernel without the tunable gets no estimate."""
    rows = find_tunables(source).get("BLOCK_ROWS")
    return None if rows is None else rows / 256


def bad_is_rejected(source: str, tools: FakeTools) -> EvalReport:
    return rejected() if source == BAD else accepted()


@dataclass
class FakeTools:
    """The harness and the profiler as scripts: `judge` decides each evaluation, `speed` each
    profile's estimated speedup, `edges` names the edge cases the validation accepts. Every
    call is recorded."""

    task: Task = field(default_factory=rmsnorm_task)
    target: str = TARGET
    judge: Callable[[str, FakeTools], EvalReport] = bad_is_rejected
    speed: Callable[[str], float | None] = by_block_rows
    edges: frozenset[str] = frozenset()
    evaluated: list[str] = field(default_factory=list)  # sources, in order
    profiled: list[tuple[str, bool]] = field(default_factory=list)  # (source, estimate_only)
    extra_configs: list[EdgeConfig] = field(default_factory=list)
    edge_passes: int = 0  # evaluations asked for the edge cases alone
    probed: list[tuple[str, str, str]] = field(default_factory=list)  # (source, config, stage)

    async def evaluate(
        self,
        kernel: KernelSource,
        on_check: CheckListener | None = None,
        *,
        edges_only: bool = False,
    ) -> EvalReport:
        source = kernel.text
        self.evaluated.append(source)
        self.edge_passes += edges_only
        result = self.judge(source, self)
        for check in result.checks:
            if on_check is not None:
                on_check(check)
        await asyncio.sleep(0)  # the engine logs the checks on the loop, as the harness's come
        return result

    async def profile(self, kernel: KernelSource, *, estimate_only: bool = False) -> ProfileResult:
        source = kernel.text
        self.profiled.append((source, estimate_only))
        return ProfileResult(summary(self.speed(source), self.target))

    def estimate_on(self, target: str) -> None:
        self.target = target

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        ok = [(name, params) for name, params in proposals if name in self.edges]
        refused = [f"{name}: refused by the fake validation" for name, _ in proposals]
        return ok, [why for why, (name, _) in zip(refused, proposals) if name not in self.edges]

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        self.extra_configs = list(configs)

    async def probe(self, kernel: KernelSource, probe: Probe) -> EvalReport:
        """The agents' `lower` and `check` tools: judged like an evaluation, and recorded."""
        source = kernel.text
        self.probed.append((source, probe.config, probe.through))
        return self.judge(source, self)


class FakeJaxApi(JaxApi):
    """`jax_api` without a jax worker: a few names answer, the rest fail; lookups recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.looked_up: list[str] = []

    async def lookup(self, name: str) -> str:
        self.looked_up.append(name)
        if name not in ("pl.BlockSpec", "pl.pallas_call", "pltpu.VMEM"):
            raise LookupFailed(f"jax.experimental.pallas has no {name!r} (fake)")
        return f"{name} (class) in jax (fake)\nsignature: {name}(...)"


# -- gates -------------------------------------------------------------------------------------


class StopAt:
    """Approves every proposal until the one of step `step`, which waits forever (for the test
    to cancel the run there); `reached` is set when it does."""

    name = Decider.SCRIPTED

    def __init__(self, step: str) -> None:
        self.step = step
        self.reached = asyncio.Event()
        self.seen: list[Proposal] = []

    async def decide(self, proposal: Proposal) -> Decision:
        self.seen.append(proposal)
        if proposal.step == self.step:
            self.reached.set()
            await asyncio.Event().wait()
        return Decision(APPROVE)


# -- engines and searches ----------------------------------------------------------------------


@dataclass
class Bench:
    """Where fast engine tests run: a store, a session directory, the tools of the test."""

    store: Store
    root: Path
    tools: FakeTools = field(default_factory=FakeTools)

    def engine(
        self,
        provider: Provider,
        *,
        gate: Gate | None = None,
        mode: str = "auto",
        session_id: str | None = None,
        budget: Budget | None = None,
        tools: FakeTools | None = None,
        roles: RolePlan | None = None,
        jax_api: JaxApi | None = None,
        **limits: object,
    ) -> SessionEngine:
        """An engine on a new session, or on `session_id` again (a resume). With `jax_api`
        the sub-agents get their tools (`roles`, or the defaults), on these fake tools."""
        if session_id is None:
            session_id = self.store.create_session("12p_RMSNorm", mode).id
        chosen = gate or AutoGate()
        settings = {"max_iterations": 1, "tune_candidates": 0, **limits}
        tools = tools or self.tools
        toolbox = None
        if jax_api is not None:
            toolbox = Toolbox(
                tools.task,
                TARGET,
                self.root / session_id / "tools",
                prober=tools,
                profiler=tools,
                jax_api=jax_api,
            )
        return SessionEngine(
            journal=Journal(self.store, session_id),
            client=LLMClient(provider, budget=budget),
            tools=tools,
            workspace=Workspace(self.root / session_id),
            gates=lambda m: chosen if m == mode else AutoGate(),
            mode=mode,
            task_facts="id: 12p_RMSNorm (facts of the fake task)",
            limits=LoopLimits(**settings),  # type: ignore[arg-type]
            roles=roles,
            toolbox=toolbox,
        )

    def search(
        self,
        provider: Provider,
        *,
        session_id: str | None = None,
        tools: FakeTools | None = None,
        moves: MoveCheck | None = None,
        seed: str = "",
        **config: object,
    ) -> Search:
        """A search on a new Graph session with `config` (from `seed`, a kernel source, when
        given), or the search of `session_id` again (with its stored settings); `moves`: the
        agent's word on strategies it cannot apply."""
        settings = SearchConfig(**config)  # type: ignore[arg-type]
        resumed = session_id is not None
        if session_id is None:
            session_id = self.store.create_session("12p_RMSNorm", "graph").id
        engine = SessionEngine(
            journal=Journal(self.store, session_id),
            client=LLMClient(provider),
            tools=tools or self.tools,
            workspace=Workspace(self.root / session_id),
            gates=lambda m: AutoGate(),
            mode="graph",
            task_facts="id: 12p_RMSNorm (facts of the fake task)",
            limits=search_limits(settings),
        )
        return search_on(engine, settings, seed, resumed=resumed, moves=moves)


# -- reading a session back --------------------------------------------------------------------


def events(store: Store, session_id: str, cls: type | None = None) -> list[SessionEvent]:
    decoded = [decode(e.kind, e.payload) for e in store.events(session_id)]
    return [e for e in decoded if cls is None or isinstance(e, cls)]


def kinds(store: Store, session_id: str) -> list[str]:
    """`kind:step` (or `kind:ref`) of every stored event, in order."""
    return [
        f"{e.kind}:{e.payload.get('step', e.payload.get('ref'))}" for e in store.events(session_id)
    ]


def graph_from_events(db: Store, session_id: str) -> dict[str, tuple]:
    """Each node as its last SearchNodeChanged event says it is."""
    last: dict[str, tuple] = {}
    for event in events(db, session_id, SearchNodeChanged):
        assert isinstance(event, SearchNodeChanged)
        last[event.node] = (
            event.status,
            event.score,
            tuple(event.parents),
            event.strategy,
            event.version_id,
        )
    return last


def graph_in_store(db: Store, session_id: str) -> dict[str, tuple]:
    return {
        n.data["ref"]: (
            n.status,
            n.score,
            tuple(n.data["parents"]),
            n.strategy,
            n.kernel_version_id,
        )
        for n in db.search_nodes(session_id)
    }
