"""A step's guard against proposals already turned down: a kernel the harness or the engineer
turned down is not shown again; the role is asked for another, and a role that only repeats
such kernels, or begins its answer with `NOTHING_ELSE`, has nothing new. Read from the journal
on replay, so a resumed step decides as it did. No jax here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.events import (
    DecisionMade,
    LlmAnswer,
    ProposalRepeated,
    SessionEvent,
)
from maxkernel_tui.agents.orchestration.gates import Subject
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.orchestration.limits import LoopLimits
from maxkernel_tui.agents.orchestration.verdicts import VerdictBook
from maxkernel_tui.agents.roles.context import NOTHING_ELSE
from maxkernel_tui.agents.roles.role import Role

SAID_CHARS = 600  # of a role's own words on why it has nothing else


@dataclass
class Repeats:
    journal: Journal
    verdicts: VerdictBook
    limits: LoopLimits
    emit: Callable[[SessionEvent], Any]

    def rejection(self, key: str, subject: Subject, text: str) -> str | None:
        """Why `text` was turned down before, in words, if it was. A replayed step keeps what
        it stored: the book holds verdicts given after the step first ran."""
        decided = self.journal.recall(keys.sub(key, "decision"), DecisionMade)
        if subject != Subject.KERNEL or decided is not None:
            return None
        stored = self.journal.recall(keys.sub(key, "repeat"), ProposalRepeated)
        if stored is not None:
            return stored.rejection
        rejection = self.verdicts.rejection(text)
        return None if rejection is None else rejection.words()

    def nothing_new(self, key: str, role: Role, rejection: str, repeats: int) -> str | None:
        """Log that `role` repeated a turned-down kernel (its `repeats`-th at this step); why it
        has nothing new (it said so, or repeated too often), or None: ask it again."""
        why = self._said(key)
        if why is None and repeats > self.limits.max_repeats:
            why = (
                f"its last {self.limits.max_repeats + 1} proposals repeated kernels already "
                "turned down"
            )
        event = ProposalRepeated(keys.sub(key, "repeat"), key, role, rejection, why is not None)
        self.emit(event)
        return why

    def _said(self, key: str) -> str | None:
        """What the role said when it began its answer with NOTHING_ELSE (None: it did not)."""
        answer = self.journal.recall(keys.sub(key, "llm"), LlmAnswer)
        text = answer.text.lstrip() if answer is not None else ""
        if not text.startswith(NOTHING_ELSE):
            return None
        first = text[len(NOTHING_ELSE) :].split("```", 1)[0]
        return " ".join(first.split())[:SAID_CHARS] or "it gave no reason"
