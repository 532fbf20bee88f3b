"""The workbench's link to a session's engine: start, resume, interrupt, hand off, decide, explain,
and what the session does, delivered to the screen as `AgentEvents` messages: the events and the
proposals that wait for the engineer, in the order they happened, batched a few times a second so
that a fast model stream never re-renders the screen per token. No jax here; this module loads
the engine, so the workbench imports it only when the agents first run."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from textual.message import Message
from textual.message_pump import MessagePump

from maxkernel_tui.agents.llm.provider import Provider
from maxkernel_tui.agents.orchestration.ending import BestAtEnd, best_at_end
from maxkernel_tui.agents.orchestration.engine import LoopLimits, Outcome, SessionEngine
from maxkernel_tui.agents.orchestration.events import SessionEvent
from maxkernel_tui.agents.orchestration.gates import (
    AutoGate,
    Decision,
    Gate,
    InteractiveGate,
    Proposal,
)
from maxkernel_tui.agents.orchestration.session import OpenSession, open_session
from maxkernel_tui.agents.search.config import SearchConfig
from maxkernel_tui.agents.search.launch import OpenSearch
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.rows import HITL, KernelVersion

DRAW_INTERVAL_S = 0.1  # what the session did is delivered at most this often
AgentUpdate = SessionEvent | Proposal  # a proposal: it waits for the engineer's decision


class AgentEvents(Message):
    """What the session did since the last batch, in order. `finished`: its loop has ended by
    itself (not stopped by the engineer)."""

    def __init__(self, updates: list[AgentUpdate], finished: bool) -> None:
        super().__init__()
        self.updates = updates
        self.finished = finished


@dataclass
class AgentLink:
    store: Store
    settings: Settings
    task: Task
    harness: Callable[[], Harness]
    target: MessagePump  # where the batches are posted (the workbench)
    provider: Provider | None = None  # tests inject one; else the configured provider
    limits: LoopLimits = field(default_factory=LoopLimits)
    session_id: str | None = None
    opened: OpenSession | None = None
    running: asyncio.Task[Outcome] | None = None
    _undelivered: list[AgentUpdate] = field(default_factory=list, init=False)
    _armed: bool = field(default=False, init=False)  # a delivery is scheduled
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.gate = InteractiveGate(on_pending=self._collect)
        self._loop = asyncio.get_running_loop()

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

    @property
    def settled(self) -> bool:
        """Everything the session did so far has been delivered."""
        return not self._undelivered and not self._armed

    @property
    def mode(self) -> str | None:
        """The running engine's mode; None before the first start."""
        return self.engine.mode if self.engine is not None else None

    def gate_for(self, mode: str) -> Gate:
        """The gate the engine asks in `mode`: the engineer in HITL, nobody in Auto."""
        return self.gate if mode == HITL else AutoGate()

    async def start(self, mode: str) -> None:
        """Run the session's loop: a new session, or the stopped one again (stored steps are
        reused)."""
        if self.is_running:
            return
        if self.opened is not None:
            await self.opened.aclose()
        self.opened = await open_session(
            self.store,
            self.settings,
            task=None if self.session_id else self.task,
            mode=mode,
            gates=self.gate_for,
            limits=self.limits,
            resume=self.session_id,
            provider=self.provider,
            listener=self._collect,
            harness=self.harness,
        )
        self.session_id = self.opened.session_id
        if self.opened.resumed and self.opened.engine.mode != mode:
            self.opened.engine.hand_off(mode)
        self.running = asyncio.create_task(self.opened.engine.run())
        self.running.add_done_callback(lambda _: self._schedule())

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

    def stored_mode(self, session_id: str) -> str:
        """The mode a stored session was in when it stopped (the engine keeps it in the store)."""
        return self.store.session(session_id).mode

    def ended(self, session_id: str | None = None) -> BestAtEnd | None:
        """What the session (or `session_id`, a search's) ended on; None before it ended."""
        chosen = session_id or self.session_id
        return None if chosen is None else best_at_end(self.store, chosen)

    def best_accepted(self) -> str | None:
        """The session's best accepted kernel so far (what a hand-off to Graph starts from)."""
        if self.engine is not None and self.engine.best is not None:
            return self.engine.best.source
        ended = self.ended()
        return None if ended is None or ended.version is None else ended.version.source

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

    def hand_off(self, mode: str) -> None:
        if self.engine is not None and self.is_running:
            self.engine.hand_off(mode)

    def intervene(self, subject: str, content: str) -> bool:
        """Queue the engineer's edit or message for the next step; False when no session runs."""
        if self.engine is None or not self.is_running:
            return False
        self.engine.intervene(subject, content)
        return True

    async def explain(self, question: str) -> str | None:
        """The explainer's answer about the session; None when no session was started."""
        return None if self.engine is None else await self.engine.explain(question)

    async def open_search(
        self, seed: str, config: SearchConfig, listener: Callable[[SessionEvent], None]
    ) -> OpenSearch:
        """Stop the session and open a graph search of the task seeded with `seed` as its root."""
        from maxkernel_tui.agents.search.launch import open_search

        await self.interrupt()
        return await open_search(
            self.store,
            self.settings,
            task=self.task,
            config=config,
            seed=seed,
            provider=self.provider,
            listener=listener,
        )

    # -- delivery -------------------------------------------------------------------------------

    def _collect(self, update: AgentUpdate) -> None:
        """Called by the engine and the gate, possibly from another thread."""
        with self._lock:
            self._undelivered.append(update)
        self._schedule()

    def _schedule(self) -> None:
        with self._lock:
            if self._armed:
                return
            self._armed = True
        self._loop.call_soon_threadsafe(self._loop.call_later, DRAW_INTERVAL_S, self._deliver)

    def drain(self) -> list[AgentUpdate]:
        """What is not delivered yet, taken now (to draw it before the engineer's stop)."""
        with self._lock:
            updates, self._undelivered = self._undelivered, []
        return updates

    def _deliver(self) -> None:
        updates = self.drain()
        with self._lock:
            self._armed = False
        running = self.running
        finished = running is not None and running.done() and not running.cancelled()
        if updates or finished:
            self.target.post_message(AgentEvents(updates, finished))

    async def aclose(self) -> None:
        await self.interrupt()
        if self.opened is not None:
            await self.opened.aclose()
