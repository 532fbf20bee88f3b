"""One workbench session, behind the workbench screen: it owns the evaluation service (this
machine's worker pool or a Ray cluster, as the settings say), the store, the agents' engine with
its journal and gate, and every action the engineer takes on the task, by hand or through the
agents: evaluate, profile, start, decide, intervene, hand off, explain, open a search.

An evaluation by hand (ctrl+e) and an agent's take the same route: the evaluation service
(kernels/service) on the session's `EvaluationSetup`, built from the settings where the `eval`,
`profile` and `run` commands build theirs, so the same executor and the same evaluation options.
The engineer's evaluation is of the editor's text, sent as text; the kernel file, which only a
save writes, is never read for it. What the agents do reaches `deliver` in batches, a few times
a second, on the event loop (services/delivery.py), so that a fast model stream never redraws
per token.

No Textual, no jax: the engine, the tools and Ray load on first use (the workbench's first frame
does not pay for them)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.report.checks import Check, EvalReport
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.services.delivery import BatchedDelivery
from maxkernel_tui.store.kinds import Mode

if TYPE_CHECKING:
    from maxkernel_tui.agents.llm.provider import Provider
    from maxkernel_tui.agents.orchestration.ending import BestAtEnd
    from maxkernel_tui.agents.orchestration.engine import LoopLimits, Outcome, SessionEngine
    from maxkernel_tui.agents.orchestration.events import SessionEvent
    from maxkernel_tui.agents.orchestration.gates import Decision, Gate, Proposal, Subject
    from maxkernel_tui.agents.orchestration.session import OpenSession
    from maxkernel_tui.agents.search.config import SearchConfig
    from maxkernel_tui.agents.search.launch import OpenSearch
    from maxkernel_tui.kernels.service.portability import PortabilityRow
    from maxkernel_tui.kernels.service.service import (
        EvaluationService,
        Harness,
        KernelSource,
        ProfileResult,
    )
    from maxkernel_tui.kernels.service.setup import EvaluationSetup
    from maxkernel_tui.services.evidence import EvidenceCard
    from maxkernel_tui.services.kernel_file import Kept
    from maxkernel_tui.services.search_feed import SearchFeed
    from maxkernel_tui.store.db import Store
    from maxkernel_tui.store.rows import KernelVersion

    AgentUpdate = SessionEvent | Proposal  # a proposal: it waits for the engineer's decision

HarnessFactory = Callable[[], "Harness"]  # the app's shared harness, started on first use
Deliver = Callable[[Sequence["AgentUpdate"], bool], None]  # (updates in order, the loop has ended)


@dataclass
class WorkbenchSession:
    settings: Settings
    task: Task
    workdir: Path  # the task's workbench folder: kernel.py, snapshots, traces
    harness: HarnessFactory
    deliver: Deliver
    provider: Provider | None = None  # tests inject one; else the configured provider
    limits: LoopLimits | None = None
    session_id: str | None = None
    opened: OpenSession | None = None
    running: asyncio.Task[Outcome] | None = None
    # kernels of the engineer's that another replaced in the kernel file, kept as versions,
    # newest last (f6 goes back to them first)
    kept: list[Kept] = field(default_factory=list)
    # kernel proposals judged ahead of the engineer's key, and portability matrices, by source
    drafts: dict[str, EvalReport] = field(default_factory=dict)
    matrices: dict[str, list[PortabilityRow]] = field(default_factory=dict)
    _setup: EvaluationSetup | None = field(default=None, init=False)
    _service: EvaluationService | None = field(default=None, init=False)
    _store: Store | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        from maxkernel_tui.agents.orchestration.gates import InteractiveGate

        self.gate = InteractiveGate(on_pending=self._collect)
        self._delivery: BatchedDelivery[AgentUpdate] = BatchedDelivery(
            asyncio.get_running_loop(), self.deliver, ended=self._loop_ended
        )

    @property
    def kernel_path(self) -> Path:
        return self.workdir / "kernel.py"

    @property
    def setup(self) -> EvaluationSetup:
        """Where and how the engineer's and the agents' evaluations and profiles run: the
        settings' `EvaluationSetup`, as the `eval`, `profile` and `run` commands build it."""
        if self._setup is None:
            from maxkernel_tui.kernels.service.setup import EvaluationSetup

            self._setup = EvaluationSetup.of(self.settings)
        return self._setup

    @property
    def target(self) -> str:
        return self.settings.tpu_target  # the setup's (read here without loading the tools)

    @property
    def executor(self) -> str:
        """Where evaluations run, in words: "local workers" or "Ray at HOST:PORT"."""
        return self.setup.executor_words

    @property
    def store(self) -> Store:
        """This process's writer of the settings' store (shared, never closed here)."""
        if self._store is None:
            from maxkernel_tui.store.db import open_store

            self._store = open_store(self.settings.store_path)
        return self._store

    # -- by hand: the service the agents' tools wrap ---------------------------------------------

    async def service(self) -> EvaluationService:
        """The evaluation service on the settings' executor, made on first use (connecting to a
        Ray cluster here: one that cannot be used is a ClusterError)."""
        if self._service is None:
            from maxkernel_tui.kernels.service.service import EvaluationService

            traces = self.workdir / "traces"
            self._service = await asyncio.to_thread(
                EvaluationService, self.setup, self.task, traces, harness=self.harness
            )
        return self._service

    def replace_kernel(self, source: str, why: str, session_id: str | None = None) -> Kept | None:
        """Make `source` (a version of this session, or of `session_id`: a search's) the kernel
        file; what the file held that no version has is kept first, as a version of this
        session (else of `session_id`), and remembered for f6. What was kept, if anything."""
        from maxkernel_tui.services.kernel_file import replace_kernel

        owner = self.session_id or session_id
        assert owner is not None, "a kernel version comes from a session"
        kept = replace_kernel(self.store, self.kernel_path, source, owner, why)
        if kept is not None:
            self.kept.append(kept)
        return kept

    async def evaluate(
        self, source: str, on_check: Callable[[Check], None] | None = None
    ) -> EvalReport:
        """The engineer's evaluation of `source` (the editor's, saved or not)."""
        service = await self.service()
        return await asyncio.to_thread(service.evaluate, self._kernel(source), on_check)

    async def profile(self, source: str) -> ProfileResult:
        service = await self.service()
        return await asyncio.to_thread(service.profile, self._kernel(source))

    def _kernel(self, source: str) -> KernelSource:
        """The editor's `source`, named as the kernel file it may be saved to."""
        from maxkernel_tui.kernels.service.service import KernelSource

        return KernelSource(source, self.kernel_path.name)

    # -- evidence -------------------------------------------------------------------------------

    async def draft(self, source: str) -> EvalReport:
        """A kernel proposal judged before the engineer decides (draft-ahead): the evaluation
        ctrl+e makes, once per kernel, so that the card shown is the verdict approved."""
        if source not in self.drafts:
            self.drafts[source] = await self.evaluate(source)
        return self.drafts[source]

    async def portability(self, source: str) -> list[PortabilityRow]:
        """The kernel compiled and estimated on every TPU generation (the evidence card's
        matrix), once per kernel."""
        from maxkernel_tui.kernels.service.portability import portability

        if source not in self.matrices:
            service = await self.service()
            traces = self.workdir / "traces"
            rows = await asyncio.to_thread(portability, service, self._kernel(source), traces)
            self.matrices[source] = rows
        return self.matrices[source]

    def proposal_card(self, proposal: Proposal) -> EvidenceCard:
        """The card of a waiting kernel proposal: its draft verdict (when judged already) and
        the tokens and dollars of the step that proposed it."""
        from maxkernel_tui.agents.orchestration import keys
        from maxkernel_tui.agents.orchestration.events import LlmAnswer
        from maxkernel_tui.services.evidence import CardSubject, report_card

        report = self.drafts.get(proposal.content)
        journal = self.engine.journal if self.engine else None
        answer = journal.recall(keys.sub(proposal.step, "llm"), LlmAnswer) if journal else None
        waiting = "judged ahead of your decision" if report else "being judged ahead"
        return report_card(
            CardSubject.PROPOSAL,
            f"{proposal.role}'s proposal at {proposal.step}",
            self.task.task_id,
            report,
            None,
            tokens=answer.tokens if answer else 0,
            cost_usd=(answer.cost_usd or 0.0) if answer else 0.0,
            cost_of=f"the model call of {proposal.step}",
            notes=[f"waiting for your decision: {waiting} (a approves this kernel)"],
        )

    def version_card(self, number: int) -> tuple[EvidenceCard, str] | None:
        """The card of the session's kernel version `number` and its source; None when the
        session has no such version."""
        from maxkernel_tui.services.evidence import CardSubject, version_card

        found = next((v for v in self.kernel_versions() if v.number == number), None)
        if found is None:
            return None
        title = f"kernel version v{number}"
        return version_card(self.store, found.id, CardSubject.VERSION, title), found.source

    # -- the agents --------------------------------------------------------------------------

    @property
    def engine(self) -> SessionEngine | None:
        return self.opened.engine if self.opened else None

    @property
    def is_running(self) -> bool:
        return self.running is not None and not self.running.done()

    @property
    def pending(self) -> Proposal | None:
        """The proposal waiting for the engineer's decision, if any."""
        return self.gate.pending

    def gate_for(self, mode: Mode) -> Gate:
        """The gate the engine asks in `mode`: the engineer in HITL, nobody in Auto."""
        from maxkernel_tui.agents.orchestration.gates import AutoGate

        return self.gate if mode == Mode.HITL else AutoGate()

    async def start(
        self,
        mode: Mode,
        progress: Callable[[str], None] | None = None,
        *,
        seed: str | None = None,
        fresh: bool = False,
    ) -> None:
        """Run the session's loop: a new session, or the stopped one again (stored steps are
        reused); with `fresh`, a new one in any case. `seed`: the kernel a new session starts
        from (the engineer's, taken at its first step). `progress` hears what the start is
        doing (it can take a while on a cold cache: the task is described and its reference
        compiled first)."""
        from maxkernel_tui.agents.orchestration.engine import LoopLimits
        from maxkernel_tui.agents.orchestration.gates import Subject
        from maxkernel_tui.agents.orchestration.session import open_session

        if self.is_running:
            return
        if fresh:
            self.session_id = None
        if self.opened is not None:
            await self.opened.aclose()
            self.opened = None
        self.opened = await open_session(
            self.store,
            self.settings,
            task=None if self.session_id else self.task,
            mode=mode,
            gates=self.gate_for,
            limits=self.limits or LoopLimits(),
            resume=self.session_id,
            provider=self.provider,
            listener=self._collect,
            harness=self.harness,
            setup=self.setup,
            progress=progress,
        )
        self.session_id = self.opened.session_id
        from maxkernel_tui.services.drafts import DraftedTools

        engine = self.opened.engine
        engine.tools = DraftedTools(engine.tools, self.drafts)  # approved as judged ahead
        if self.opened.resumed and self.opened.engine.mode != mode:
            self.opened.engine.hand_off(mode)
        if seed is not None:
            self.opened.engine.intervene(Subject.KERNEL, seed)
        self.running = asyncio.create_task(self.opened.engine.run())
        self.running.add_done_callback(lambda _: self._delivery.schedule())

    def history(self, session_id: str) -> list[SessionEvent]:
        """A stored session's events, to draw the panes of a reopened session."""
        from maxkernel_tui.agents.orchestration.journal import Journal

        self.session_id = session_id
        return Journal(self.store, session_id).history()

    def kernel_versions(self) -> list[KernelVersion]:
        """The session's kernel versions, oldest first; [] before it has started."""
        return [] if self.session_id is None else self.store.kernel_versions(self.session_id)

    def kernel_source(self, version_id: int) -> str:
        return self.store.kernel_version(version_id).source

    def stored_mode(self, session_id: str) -> Mode:
        """The mode a stored session was in when it stopped (the engine keeps it in the store)."""
        return Mode(self.store.session(session_id).mode)

    def ended(self, session_id: str | None = None) -> BestAtEnd | None:
        """What the session (or `session_id`, a search's) ended on; None before it ended."""
        from maxkernel_tui.agents.orchestration.ending import best_at_end

        chosen = session_id or self.session_id
        return None if chosen is None else best_at_end(self.store, chosen)

    def best_accepted(self) -> str | None:
        """The session's best accepted kernel so far, by the store's one rule (what a hand-off
        to Graph starts from); None before a kernel is accepted."""
        best = None if self.session_id is None else self.store.best_kernel(self.session_id)
        return best.version.source if best is not None and best.accepted else None

    async def interrupt(self) -> bool:
        """Cancel the running step (a model call in flight is closed); False when nothing runs."""
        if not self.is_running:
            return False
        assert self.running is not None
        self.running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.running  # the engine marks the session stopped
        return True

    def decide(self, decision: Decision) -> bool:
        return self.gate.resolve(decision)

    def hand_off(self, mode: Mode) -> None:
        if self.engine is not None and self.is_running:
            self.engine.hand_off(mode)

    def intervene(self, subject: Subject, content: str) -> bool:
        """Queue the engineer's edit or message for the next step; False when no session runs."""
        if self.engine is None or not self.is_running:
            return False
        self.engine.intervene(subject, content)
        return True

    async def explain(self, question: str) -> str | None:
        """The explainer's answer about the session; None when no session was started."""
        return None if self.engine is None else await self.engine.explain(question)

    async def open_search(self, seed: str, config: SearchConfig) -> tuple[OpenSearch, SearchFeed]:
        """Stop the session and open a graph search of the task seeded with `seed` as its root,
        with the feed the search screen follows it by (its events wait for the screen)."""
        from maxkernel_tui.agents.search.launch import open_search
        from maxkernel_tui.services.search_feed import SearchFeed

        await self.interrupt()
        delivery: BatchedDelivery[SessionEvent] = BatchedDelivery(asyncio.get_running_loop())
        opened = await open_search(
            self.store,
            self.settings,
            task=self.task,
            config=config,
            seed=seed,
            provider=self.provider,
            listener=delivery.collect,
            setup=self.setup,
        )
        feed = SearchFeed(
            self.settings.store_path,
            opened.session_id,
            delivery=delivery,
            max_evals=config.max_evals,
        )
        return opened, feed

    # -- delivery -------------------------------------------------------------------------------

    def _collect(self, update: AgentUpdate) -> None:
        """Called by the engine and the gate, possibly from another thread."""
        self._delivery.collect(update)

    def _loop_ended(self) -> bool:
        running = self.running
        return running is not None and running.done() and not running.cancelled()

    @property
    def settled(self) -> bool:
        """Everything the session did so far has been delivered."""
        return self._delivery.settled

    def drain(self) -> list[AgentUpdate]:
        """What is not delivered yet, taken now (to draw it before the engineer's stop)."""
        return self._delivery.drain()

    async def aclose(self) -> None:
        await self.interrupt()
        if self.opened is not None:
            await self.opened.aclose()
        if self._service is not None:
            self._service.close()
        # the store is the process's shared writer (open_store): it stays open
