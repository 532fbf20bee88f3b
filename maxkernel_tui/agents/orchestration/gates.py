"""Gates: where a step's proposal waits for a decision.

The auto gate approves; the interactive gate waits for the UI (`resolve`); the scripted gate
serves tests. A session holds its gate in a `GateHolder`, so a hand-off swaps the gate of a
running session: a proposal already waiting on the interactive gate is approved by the hand-off.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.store.kinds import Mode


class Action(StrEnum):
    """What a gate decided about a proposal."""

    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"
    HANDOFF = "handoff"


class Subject(StrEnum):
    """What a proposal or an engineer's intervention is about (a proposal: plan or kernel)."""

    PLAN = "plan"
    KERNEL = "kernel"
    MESSAGE = "message"  # a chat message, taken as feedback
    MODE = "mode"  # a hand-off, logged at the step boundary


APPROVE, EDIT, REJECT, HANDOFF = Action.APPROVE, Action.EDIT, Action.REJECT, Action.HANDOFF


@dataclass(frozen=True)
class Proposal:
    step: str
    role: Role
    subject: Subject  # PLAN or KERNEL
    content: str
    previous: str  # what it would replace ("" when nothing)
    summary: str
    reverts: str = ""  # what of the engineer's changes it undoes, in words ("" when nothing)
    # HITL, the role has nothing new (`summary` says why): `content` is the current kernel or
    # plan; approve goes on with it, edit gives the engineer's, reject asks the role again
    nothing_new: bool = False

    @property
    def unchanged(self) -> bool:
        """It proposes what is already there (whitespace aside): nothing to decide."""
        same = self.content.strip() == self.previous.strip()
        return bool(self.previous.strip()) and same and not self.nothing_new


class Decider(StrEnum):
    """Who decided a proposal: a gate (its `name`), or none for one that changes nothing."""

    AUTO = "auto"
    SCRIPTED = "scripted"
    INTERACTIVE = "interactive"
    UNCHANGED = "unchanged"  # nothing new to judge: no gate was asked


@dataclass(frozen=True)
class Decision:
    action: Action
    content: str | None = None  # edit: the engineer's version
    feedback: str | None = None  # reject: why
    mode: Mode | None = None  # handoff: auto or graph

    def __post_init__(self) -> None:
        # typed whatever a caller passed (a terminal's answer, a script): Action and Mode
        if self.action not in tuple(Action):
            raise ValueError(f"unknown decision {self.action!r}")
        object.__setattr__(self, "action", Action(self.action))
        if self.mode is not None:
            object.__setattr__(self, "mode", Mode(self.mode))
        if self.action == EDIT and not self.content:
            raise ValueError("an edit decision needs the edited content")
        if self.action == HANDOFF and self.mode not in (Mode.AUTO, Mode.GRAPH):
            raise ValueError("a hand-off names the mode it hands to: auto or graph")


class Gate(Protocol):
    name: Decider

    async def decide(self, proposal: Proposal) -> Decision: ...


class AutoGate:
    name = Decider.AUTO

    async def decide(self, proposal: Proposal) -> Decision:
        return Decision(APPROVE)


Script = Decision | Callable[[Proposal], Decision]


class ScriptedGate:
    """Decides from a list (a decision, or a function of the proposal); approves when it runs out.
    `seen` keeps every proposal, for tests to inspect."""

    name = Decider.SCRIPTED

    def __init__(self, script: Iterable[Script] = ()) -> None:
        self._script = deque(script)
        self.seen: list[Proposal] = []

    async def decide(self, proposal: Proposal) -> Decision:
        self.seen.append(proposal)
        if not self._script:
            return Decision(APPROVE)
        item = self._script.popleft()
        return item(proposal) if callable(item) else item


class InteractiveGate:
    """Resolved by the UI: `pending` is the proposal on screen, `resolve` answers it."""

    name = Decider.INTERACTIVE

    def __init__(self, on_pending: Callable[[Proposal], None] | None = None) -> None:
        self.on_pending = on_pending
        self.pending: Proposal | None = None
        self._answer: asyncio.Future[Decision] | None = None

    async def decide(self, proposal: Proposal) -> Decision:
        self.pending = proposal
        self._answer = asyncio.get_running_loop().create_future()
        if self.on_pending is not None:
            self.on_pending(proposal)
        try:
            return await self._answer
        finally:
            self.pending, self._answer = None, None

    def resolve(self, decision: Decision) -> bool:
        """False when nothing is waiting (a key pressed twice)."""
        if self._answer is None or self._answer.done():
            return False
        self._answer.set_result(decision)
        return True


class GateHolder:
    """The session's current gate. `swap` hands off: a decision waiting on the old gate is
    approved, the running step goes on, and later proposals go to the new gate."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def decide(self, proposal: Proposal) -> tuple[Decision, Decider]:
        """The decision and the gate that made it: one swapped in while the proposal waited
        (a hand-off approves it) decided, not the engineer."""
        gate = self.gate
        decision = await gate.decide(proposal)
        return decision, self.gate.name

    def swap(self, gate: Gate) -> None:
        old, self.gate = self.gate, gate
        if isinstance(old, InteractiveGate) and old is not gate:
            old.resolve(Decision(APPROVE))
