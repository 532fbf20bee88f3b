"""The workbench's link to a session's engine: start, resume, interrupt, hand off, decide, and the
events, collected as they happen and handed to the screen in batches (a few times a second), so
that a fast model stream never re-renders the screen per token. No jax here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from maxkernel_tui.agents.llm.provider import Provider
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
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.rows import STOPPED


@dataclass
class AgentLink:
    store: Store
    settings: Settings
    task: Task
    harness: Callable[[], Harness]
    on_proposal: Callable[[Proposal], None]
    provider: Provider | None = None  # tests inject one; else the configured provider
    limits: LoopLimits = field(default_factory=LoopLimits)
    session_id: str | None = None
    pending_events: list[SessionEvent] = field(default_factory=list)
    opened: OpenSession | None = None
    running: asyncio.Task[Outcome] | None = None

    def __post_init__(self) -> None:
        self.gate = InteractiveGate(on_pending=self.on_proposal)

    @property
    def engine(self) -> SessionEngine | None:
        return self.opened.engine if self.opened else None

    @property
    def is_running(self) -> bool:
        return self.running is not None and not self.running.done()

    def _gate_for(self, mode: str) -> Gate:
        return self.gate if mode == "hitl" else AutoGate()

    async def start(self, mode: str) -> None:
        """Run the session's loop: a new session, or the stopped one again (stored steps are reused)."""
        if self.is_running:
            return
        if self.opened is not None:
            await self.opened.aclose()
        self.opened = await open_session(
            self.store,
            self.settings,
            task=None if self.session_id else self.task,
            mode=mode,
            gates=self._gate_for,
            limits=self.limits,
            resume=self.session_id,
            provider=self.provider,
            listener=self.pending_events.append,
            harness=self.harness,
        )
        self.session_id = self.opened.session_id
        if self.opened.resumed and self.opened.engine.mode != mode:
            self.opened.engine.hand_off(mode)
        self.running = asyncio.create_task(self.opened.engine.run())

    def history(self, session_id: str) -> list[SessionEvent]:
        """A stored session's events, to draw the panes of a reopened session."""
        from maxkernel_tui.agents.orchestration.journal import Journal

        self.session_id = session_id
        return Journal(self.store, session_id).history()

    async def interrupt(self) -> bool:
        """Cancel the running step (a model call in flight is closed); False when nothing runs."""
        if not self.is_running:
            return False
        assert self.running is not None
        self.running.cancel()
        try:
            await self.running
        except asyncio.CancelledError:
            pass
        if self.session_id:
            self.store.update_session(self.session_id, status=STOPPED)
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

    def take_events(self) -> list[SessionEvent]:
        events, self.pending_events[:] = list(self.pending_events), []
        return events

    async def aclose(self) -> None:
        await self.interrupt()
        if self.opened is not None:
            await self.opened.aclose()
