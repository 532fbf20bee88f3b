"""One session's HITL/Auto loop: plan → implement → test (debug until accepted) → profile →
diagnose → autotune, iteration after iteration, each proposal waiting on the session's gate.
The steps themselves are in steps.py. No jax here.

HITL and Auto are the same loop with different gates (interactive or auto); a hand-off swaps
the gate. Resuming a session is running the loop again: stored results are reused, so nothing
stored is paid for twice, and the loop continues where it stopped. The engine owns the session's
status: active while it runs, then done, failed or stopped (a cancelled run included).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace

from maxkernel_tui.agents.budget import BudgetExceeded
from maxkernel_tui.agents.llm.errors import LLMError
from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.ending import error_words
from maxkernel_tui.agents.orchestration.events import (
    BudgetReport,
    ErrorRaised,
    Note,
    SessionEnded,
)
from maxkernel_tui.agents.orchestration.gates import EDIT, REJECT, Proposal, Subject
from maxkernel_tui.agents.orchestration.limits import LoopLimits, NothingNew
from maxkernel_tui.agents.orchestration.report_text import failure_text
from maxkernel_tui.agents.orchestration.scoring import Score, significantly_better
from maxkernel_tui.agents.orchestration.steps import Steps
from maxkernel_tui.agents.roles import parsers
from maxkernel_tui.agents.roles.autotuner import describe_change, neighbours
from maxkernel_tui.agents.roles.prompts import EXPLAINER, IMPLEMENTER, PLANNER, PROFILER, Role
from maxkernel_tui.agents.roles.tunables import find_tunables, set_tunables
from maxkernel_tui.kernels.evaluation.timing.measured_choice import measure_best
from maxkernel_tui.kernels.report.checks import ACCEPTED, EvalReport
from maxkernel_tui.store.kinds import Mode, SessionStatus

__all__ = ["Best", "LoopLimits", "Outcome", "SessionEngine"]


@dataclass(frozen=True)
class Best:
    """The session's best accepted kernel as the store's one rule picks it (Store.best_kernel)."""

    version_id: int
    number: int
    source: str
    score: float | None
    score_kind: str  # "" without a score
    score_also: str = ""  # the other speedup over XLA, labelled


@dataclass(frozen=True)
class Outcome:
    reason: str
    best: Best | None
    score_kind: str
    status: SessionStatus = SessionStatus.DONE  # FAILED: the session ended on an error


class SessionEngine(Steps):
    """The loop over a session's steps; `run` drives it, the UI calls `hand_off`, `intervene`
    and `explain` while it runs."""

    # the loop's own state, on top of the steps' (the defaults hold until the loop runs)
    _current_estimate: Score = Score(None, "")
    _explained: int = 0
    _iterations: int = 0  # iterations started, for the end's ref
    _worked_on: frozenset[int] = frozenset()  # versions profiled (and so tuned) by this loop

    @property
    def best(self) -> Best | None:
        """The session's best accepted kernel so far, by the store's one rule."""
        found = self.store.best_kernel(self.session_id)
        if found is None or not found.accepted:
            return None
        version = found.version
        return Best(
            version.id,
            version.number,
            version.source,
            found.score,
            found.score_kind,
            found.score_also,
        )

    @property
    def score_kind(self) -> str:
        """What the session ranks kernels by (its best kernel's score kind); "" before a score."""
        best = self.best
        return "" if best is None else best.score_kind

    async def explain(self, question: str) -> str:
        """The explainer's answer, outside the loop (it may run while a step does)."""
        self._explained += 1
        ctx = replace(self.context(), question=question)
        return await self.ask(keys.explain(self._explained), EXPLAINER, ctx, parsers.parse_answer)

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> Outcome:
        self.set_status(SessionStatus.ACTIVE)
        reason, status = "", SessionStatus.DONE
        try:
            reason = await self._iterate()
        except BudgetExceeded as error:
            self._emit(BudgetReport(keys.sub(self.step, "budget"), self.step, str(error)))
            reason, status = f"budget: {error}", SessionStatus.STOPPED
        except NothingNew as error:  # the session converged: nothing left to try
            reason = str(error)
        except LLMError as error:
            self._emit(
                ErrorRaised(keys.sub(self.step, "error"), self.step, Role.ENGINE, str(error))
            )
            reason, status = f"model error: {error}", SessionStatus.FAILED
        except (asyncio.CancelledError, KeyboardInterrupt, EOFError):
            # Stopped (Esc, Ctrl-C, the terminal closed): resumable, and nothing more is logged.
            self._stopped = True
            self.set_status(SessionStatus.STOPPED)
            raise
        except Exception as error:  # a fault of ours or of the task's files: failed, not active
            words = error_words(error)
            self._emit(ErrorRaised(keys.sub(self.step, "error"), self.step, Role.ENGINE, words))
            reason, status = f"error: {words}", SessionStatus.FAILED
        best = self.best
        version, score = (best.version_id, best.score) if best else (None, None)
        number, kind = (best.number, best.score_kind) if best else (None, "")
        also = best.score_also if best else ""
        ref = keys.end(self._iterations)
        self._emit(SessionEnded(ref, reason, version, score, kind, number, also))
        self.set_status(status)
        return Outcome(reason, best, kind, status)

    async def _iterate(self) -> str:
        """Iterations until a limit, the target or a hand-off to Graph says stop; why it stopped."""
        stale = 0
        while self._iterations < self.limits.max_iterations:
            self._iterations += 1
            best = self.best
            before = best.score if best else None
            await self._iteration(self._iterations)
            best = self.best
            after = best.score if best else None
            better = significantly_better(after, before, self.limits.min_improvement)
            stale = 0 if better else stale + 1
            target = self.limits.target_score
            if target is not None and after is not None and after >= target:
                return f"target reached ({after:.3g} ≥ {target:.3g}, {self.score_kind})"
            if self.mode == Mode.GRAPH:
                return "handed off to a Graph search"
            if self.mode != Mode.HITL and stale >= self.limits.patience:
                return f"no significant improvement for {stale} iterations"
        return f"max iterations ({self.limits.max_iterations})"

    async def _iteration(self, i: int) -> None:
        prefix = keys.iteration(i)
        self.plan = await self.propose(
            keys.sub(prefix, "plan"), PLANNER, Subject.PLAN, parsers.parse_plan, self.plan
        )
        implement = keys.sub(prefix, "implement")
        source = await self.propose(
            implement, IMPLEMENTER, Subject.KERNEL, self.parse_kernel, self.kernel or ""
        )
        report = await self.new_version(implement, source, IMPLEMENTER)
        attempts: list[str] = []
        report = await self.debug(prefix, report, attempts)
        if report.verdict == ACCEPTED and i == 1 and self.limits.edge_cases:
            # a kernel that fails an edge case goes to the debugger like any numerics failure
            with_edges = await self.edge_cases(keys.sub(prefix, "tester"), report)
            report = await self.debug(prefix, with_edges, attempts)
        if report.verdict != ACCEPTED:
            self.feedback.append(
                f"iteration {i} ended with a rejected kernel: {failure_text(report)}"
            )
            self._restore_best()
            return
        if self.version_id in self._worked_on:  # an earlier verdict of a kernel already worked on
            number = self._number(self.version_id)
            text = f"v{number} again: profiled and tuned before; nothing new in this iteration"
            self._emit(Note(keys.sub(prefix, "again"), prefix, Role.ENGINE, text))
            self._restore_best()
            return
        await self._profile_version(keys.sub(prefix, "profile"), report)
        diagnose = keys.sub(prefix, "diagnose")
        self.diagnosis = await self.ask(diagnose, PROFILER, self.context(), parsers.parse_diagnosis)
        self._emit(Note(keys.sub(diagnose, "note"), diagnose, PROFILER, self.diagnosis))
        await self._autotune(i)

    async def _profile_version(self, step: str, report: EvalReport) -> None:
        """Profile the current (accepted) kernel: its score (stored) ranks it in the session."""
        assert self.kernel is not None and self.version_id is not None
        _, self._current_estimate = await self.profile(step, self.kernel, self.version_id, report)
        self._worked_on = self._worked_on | {self.version_id}

    def _restore_best(self) -> None:
        """Go on from the best accepted kernel, never from a rejected one."""
        best = self.best
        if best is not None:
            self.kernel, self.version_id = best.source, best.version_id

    # -- autotune -------------------------------------------------------------------------------

    async def _autotune(self, i: int) -> None:
        """Estimate each neighbouring setting of the declared tunables with the performance model;
        propose the best that beats the current kernel (on a TPU: the measured best of those);
        the harness must accept it."""
        assert self.kernel is not None
        base, tunables = self.kernel, find_tunables(self.kernel)
        step = keys.iteration_step(i, "tune")
        candidates = neighbours(tunables)[: self.limits.tune_candidates]
        if not candidates:
            self._emit(Note(keys.sub(step, "note"), step, Role.AUTOTUNER, "no tunables to search"))
            return
        # Candidates are ranked by the model against the current kernel's estimate (of the same
        # kind); the harness, and on a TPU the timing, decide whether the winner is kept.
        scored = await self._estimate_candidates(step, base, candidates)
        winning = [
            (value, values)
            for value, values in scored
            if significantly_better(
                value, self._current_estimate.value, self.limits.min_improvement
            )
        ]
        winners = [values for _, values in winning]
        if self.timer is not None and winning:
            winners = await self._measured_winners(step, base, tunables, winning)
        for n, values in enumerate(winners[: self.limits.tune_evaluations]):
            if await self._try_setting(keys.sub(step, f"apply{n}"), base, tunables, values):
                return

    async def _measured_winners(
        self,
        step: str,
        base: str,
        tunables: dict[str, int],
        winning: list[tuple[float, dict[str, int]]],
    ) -> list[dict[str, int]]:
        """On a TPU: the current kernel and the model's best few timed on the device; the
        measured best, if it beats the current kernel significantly (else none). When nothing
        could be timed, the model's winners stand."""
        assert self.timer is not None
        current = self._current_estimate
        shown = "?" if current.value is None else f"{current.value:.3g}"
        ranked: list[tuple[Mapping[str, int], str]] = [(tunables, f"{current.kind} {shown}")]
        ranked += [(values, f"{current.kind} {value:.3g}") for value, values in winning]
        measurement = await asyncio.to_thread(
            measure_best,
            ranked,
            lambda values: set_tunables(base, dict(values)),
            self.timer,
            baseline="the current kernel",
        )
        text = "\n".join(["settings timed on the device", *measurement.lines()])
        self._emit(Note(keys.sub(step, "measured"), step, Role.AUTOTUNER, text))
        if measurement.best is None:
            return [values for _, values in winning]
        return [] if measurement.best == tunables else [dict(measurement.best)]

    async def _estimate_candidates(
        self, step: str, base: str, candidates: list[dict[str, int]]
    ) -> list[tuple[float, dict[str, int]]]:
        """The candidates the model could estimate (in the current kernel's kind), best first,
        and a note that lists them."""
        current = self._current_estimate
        scored: list[tuple[float, dict[str, int]]] = []
        for n, values in enumerate(candidates):
            source = set_tunables(base, values)
            _, estimate = await self.profile(keys.sub(step, f"c{n}"), source, None, None)
            if estimate.value is not None and estimate.kind == current.kind:
                scored.append((estimate.value, values))
        scored.sort(key=lambda item: -item[0])
        tunables = find_tunables(base)
        lines = [f"{describe_change(tunables, values)}: {value:.3g}" for value, values in scored]
        shown = "?" if current.value is None else f"{current.value:.3g}"
        heading = f"{len(candidates)} settings estimated ({current.kind}); current kernel {shown}"
        text = "\n".join([heading, *lines])
        self._emit(Note(keys.sub(step, "note"), step, Role.AUTOTUNER, text))
        return scored

    async def _try_setting(
        self, key: str, base: str, tunables: dict[str, int], values: dict[str, int]
    ) -> bool:
        """Propose `values` at the gate; True when the harness accepts the (maybe edited) kernel."""
        self.take_interventions(key)
        self.start(key, Role.AUTOTUNER)
        proposed = set_tunables(base, values)
        change = describe_change(tunables, values)
        proposal = Proposal(key, Role.AUTOTUNER, Subject.KERNEL, proposed, base, change)
        decision = await self.decide(key, proposal)
        if decision.action == REJECT:
            self.feedback.append(
                f"autotuner's change was rejected: {decision.feedback or 'no reason given'}"
            )
            return False
        chosen = decision.content if decision.action == EDIT and decision.content else proposed
        report = await self.new_version(key, chosen, Role.AUTOTUNER)
        if report.verdict == ACCEPTED:
            await self._profile_version(keys.sub(key, "profile"), report)
            return True
        self._restore_best()
        return False
