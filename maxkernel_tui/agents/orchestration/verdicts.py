"""What a session has judged, by kernel: a kernel is judged once. No jax here.

A verdict is keyed by the kernel's normalised source (fingerprint.py: comments and layout
aside), the task's snapshot digest (every file of its folder, as the harness hashes it), the
configuration set the harness checks (the task's and the tester's edge cases) and the TPU
target: the same key, the same verdict, so a proposal that repeats a judged kernel is not
evaluated again. A kernel the engineer rejected at the gate is remembered too, with the reason,
though nothing evaluated it. The book is rebuilt from the session's events
(`EvaluationDone.verdict_hash`), so a resumed session and every expansion of a search share it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from maxkernel_tui.agents.orchestration.events import (
    DecisionMade,
    EvaluationDone,
    ProposalMade,
    SessionEvent,
)
from maxkernel_tui.agents.orchestration.fingerprint import kernel_hash
from maxkernel_tui.agents.orchestration.gates import REJECT, Subject
from maxkernel_tui.kernels.edge_configs import EdgeConfig
from maxkernel_tui.kernels.report.checks import REJECTED
from maxkernel_tui.kernels.snapshot import task_digest
from maxkernel_tui.kernels.task import Task


@dataclass(frozen=True)
class Rejection:
    """Why a kernel was turned down: by the harness (an evaluation of version `number`) or by
    the engineer at the gate (`number` 0: it never became a version)."""

    number: int
    reason: str
    by_engineer: bool = False

    def words(self) -> str:
        who = "rejected by the engineer" if self.by_engineer else f"v{self.number}, rejected"
        return f"{who}: {self.reason}"


class VerdictBook:
    def __init__(self, task: Task, target: str, history: list[SessionEvent]) -> None:
        self._base = [task_digest(task), sorted(task.configs), target]
        self._extra: list[EdgeConfig] = []
        self._judged: dict[str, EvaluationDone] = {}
        # rejections by kernel alone: a kernel rejected at fewer configurations stays rejected
        # when edge cases join them
        self._failed: dict[str, Rejection] = {}
        self._refused: dict[str, Rejection] = {}  # the engineer's rejections, by kernel
        kernels: dict[str, str] = {}  # step -> the kernel proposed there
        for event in history:
            if isinstance(event, EvaluationDone):
                self.record(event)
            elif isinstance(event, ProposalMade) and event.subject == Subject.KERNEL:
                if not event.nothing_new:  # no proposal: the current kernel, never refused
                    kernels[event.step] = event.content
            elif isinstance(event, DecisionMade) and event.action == REJECT:
                refused = kernels.get(event.step)
                if refused is not None:
                    self.refuse(refused, event.feedback or "no reason given")

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        """Edge cases join every later evaluation: a verdict without them is another key."""
        self._extra = [(name, dict(params)) for name, params in configs]

    def key(self, source: str) -> str:
        extra = sorted([name, params] for name, params in self._extra)
        text = json.dumps([kernel_hash(source), *self._base, extra], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def record(self, event: EvaluationDone) -> None:
        """An evaluation's verdict (the first one for a key stands)."""
        if event.verdict_hash:
            self._judged.setdefault(event.verdict_hash, event)
        if event.kernel_hash and event.verdict == REJECTED:
            rejection = Rejection(event.version_number, event.failure or "no check decided")
            self._failed.setdefault(event.kernel_hash, rejection)

    def refuse(self, source: str, reason: str) -> None:
        """The engineer rejected this kernel at the gate."""
        self._refused.setdefault(kernel_hash(source), Rejection(0, reason, by_engineer=True))

    def earlier(self, source: str) -> EvaluationDone | None:
        """The evaluation that already judged this kernel, at this task, configurations and
        target."""
        return self._judged.get(self.key(source))

    def rejection(self, source: str) -> Rejection | None:
        """Why this kernel was turned down before, if it was."""
        judged = self.earlier(source)
        if judged is not None and judged.verdict == REJECTED:
            return Rejection(judged.version_number, judged.failure or "no check decided")
        kernel = kernel_hash(source)
        return self._failed.get(kernel) or self._refused.get(kernel)
