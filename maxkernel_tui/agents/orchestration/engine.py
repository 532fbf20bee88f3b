"""One session's loop: plan → implement → test (debug until accepted) → profile → diagnose →
autotune, iteration after iteration, each proposal waiting on the session's gate.

HITL and Auto are the same loop with different gates (interactive or auto); a hand-off swaps
the gate. Every step has a key that is the same on every run, and every result that costs
something (a model answer, a decision, an evaluation, a profile) is an event stored under its
key. Resuming a session is running the loop again: stored results are reused, so nothing
stored is paid for twice, and the loop continues where it stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.budget import BudgetExceeded
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.errors import LLMError
from maxkernel_tui.agents.llm.types import Discarded, Done, TextDelta, UsageChunk
from maxkernel_tui.agents.orchestration import diffs
from maxkernel_tui.agents.orchestration.events import (
    BudgetReport,
    DecisionMade,
    EdgeCasesChosen,
    ErrorRaised,
    EvaluationDone,
    Intervention,
    LlmAnswer,
    ModeChanged,
    Note,
    ProfileDone,
    ProposalMade,
    SessionEnded,
    StepStarted,
    TextChunk,
    UsageReport,
    VersionCreated,
)
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    HANDOFF,
    REJECT,
    Decision,
    Gate,
    GateHolder,
    Proposal,
)
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.orchestration.scoring import (
    Score,
    estimated_score,
    measured_score,
    significantly_better,
)
from maxkernel_tui.agents.orchestration.tools import KernelTools
from maxkernel_tui.agents.orchestration.workspace import Workspace
from maxkernel_tui.agents.roles import parsers
from maxkernel_tui.agents.roles.autotuner import describe_change, neighbours
from maxkernel_tui.agents.roles.context import Failure, StepContext
from maxkernel_tui.agents.roles.prompts import (
    DEBUGGER,
    EXPLAINER,
    IMPLEMENTER,
    PLANNER,
    PROFILER,
    TESTER,
    build_request,
)
from maxkernel_tui.agents.roles.tunables import find_tunables, set_tunables
from maxkernel_tui.kernels.evaluation.report import format_check
from maxkernel_tui.store.rows import DONE, FAILED, STOPPED

TEXT_FLUSH_S = (
    0.25  # streamed text reaches the log (and the UI) a few times a second, not per token
)
TEXT_FLUSH_CHARS = 4000


@dataclass(frozen=True)
class LoopLimits:
    max_iterations: int = 3
    max_debug_attempts: int = 3  # debugger fixes per failing kernel
    max_rejections: int = 5  # re-proposals of one step before it is given up
    patience: int = 2  # iterations without a significant improvement before Auto stops
    min_improvement: float = 0.02  # what counts as significant (relative)
    target_score: float | None = None  # stop once the best score reaches it
    tune_candidates: int = 6  # performance-model estimates per autotune
    tune_evaluations: int = 1  # harness evaluations per autotune
    edge_cases: bool = (
        True  # the tester proposes edge-case configurations after the first accepted kernel
    )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Best:
    version_id: int
    number: int
    source: str
    score: float | None


@dataclass(frozen=True)
class Outcome:
    reason: str
    best: Best | None
    score_kind: str
    iterations: int


@dataclass(frozen=True)
class Expansion:
    """What one search expansion produced: the last kernel version and how it fared."""

    version_id: int
    source: str
    verdict: str
    score: float | None  # None when rejected or not scored
    score_kind: str
    failure: str | None


class StepGivenUp(Exception):
    """A step's proposals were rejected more often than the limits allow."""


_ORIGIN = {IMPLEMENTER: "implementer", DEBUGGER: "debugger"}


class SessionEngine:
    def __init__(
        self,
        *,
        journal: Journal,
        client: LLMClient,
        tools: KernelTools,
        workspace: Workspace,
        gates: Callable[[str], Gate],
        mode: str,
        task_facts: str,
        limits: LoopLimits = LoopLimits(),
        model: str | None = None,
    ) -> None:
        self.journal, self.client, self.tools, self.workspace = journal, client, tools, workspace
        self.store, self.session_id = journal.store, journal.session_id
        self.task = tools.task
        self._gate_for = gates  # mode -> the gate that decides in that mode
        self.gates = GateHolder(gates(mode))
        self.mode = mode
        self.limits, self.model, self.task_facts = limits, model, task_facts
        self.plan = ""
        self.kernel: str | None = None
        self.version_id: int | None = None
        self.best: Best | None = None
        self.score_kind = ""
        self.step = ""
        self._feedback: list[str] = []
        self._queued: list[tuple[str, str]] = []  # interventions waiting for the next step boundary
        self._last_report: dict[str, Any] | None = None
        self._last_profile: tuple[dict[str, Any] | None, str] = (None, "")
        self._diagnosis: str | None = None
        self._current_estimate = Score(None, "")
        self._explained = 0
        self._stopped = False

    # -- what the UI calls ------------------------------------------------------------------

    def hand_off(self, mode: str) -> None:
        """Swap the gate now (a proposal waiting on the interactive gate is approved); the mode
        change is logged at the next step boundary, like every intervention."""
        self.gates.swap(self._gate_for(mode))
        self._queued.append(("mode", mode))

    def intervene(self, subject: str, content: str) -> None:
        """The engineer's edit of the kernel or plan, or a chat message; taken at the next step."""
        if subject not in ("kernel", "plan", "message"):
            raise ValueError(f"unknown intervention {subject!r}")
        self._queued.append((subject, content))

    async def explain(self, question: str) -> str:
        """The explainer's answer, outside the loop (it may run while a step does)."""
        self._explained += 1
        key = f"explain/{self._explained}"
        return await self._ask(
            key, EXPLAINER, replace(self._context(), question=question), parsers.parse_answer
        )

    async def expand(self, node: str, parent: str, plan: str, instruction: str) -> Expansion:
        """One search expansion from `parent` (a kernel file) and its `plan`: the implementer
        applies `instruction` (a strategy), the debugger fixes what the harness rejects, an accepted
        kernel is profiled. Steps are keyed under `node`, so a resumed search reuses them."""
        self.kernel, self.plan, self._feedback = parent or None, plan, [instruction]
        self.version_id = None
        source = await self._propose(
            f"{node}/implement", IMPLEMENTER, "kernel", parsers.parse_kernel, parent
        )
        report = await self._new_version(f"{node}/implement", source, "implementer")
        report = await self._debug(node, report, [])
        assert self.kernel is not None and self.version_id is not None
        if report["verdict"] != "accepted":
            return Expansion(
                self.version_id, self.kernel, "rejected", None, "", self._failure_text(report)
            )
        score, _ = await self._profile(f"{node}/profile", self.kernel, self.version_id, report)
        return Expansion(self.version_id, self.kernel, "accepted", score.value, score.kind, None)

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> Outcome:
        iteration, stale, reason = 0, 0, ""
        try:
            while True:
                if iteration >= self.limits.max_iterations:
                    reason = f"max iterations ({self.limits.max_iterations})"
                    break
                iteration += 1
                before = self.best.score if self.best else None
                await self._iteration(iteration)
                after = self.best.score if self.best else None
                stale = (
                    0
                    if significantly_better(after, before, self.limits.min_improvement)
                    else stale + 1
                )
                target = self.limits.target_score
                if target is not None and after is not None and after >= target:
                    reason = f"target reached ({after:.3g} ≥ {target:.3g}, {self.score_kind})"
                    break
                if self.mode == "graph":
                    reason = "handed off to a Graph search"
                    break
                if self.mode != "hitl" and stale >= self.limits.patience:
                    reason = f"no significant improvement for {stale} iterations"
                    break
            status = DONE
        except BudgetExceeded as error:
            self._emit(BudgetReport(f"{self.step}/budget", self.step, str(error)))
            reason, status = f"budget: {error}", STOPPED
        except StepGivenUp as error:
            reason, status = str(error), STOPPED
        except LLMError as error:
            self._emit(ErrorRaised(f"{self.step}/error", self.step, "", str(error)))
            reason, status = f"model error: {error}", FAILED
        except asyncio.CancelledError:
            # Stopped (Esc, Ctrl-C): work still finishing in threads must not log into the session,
            # which a resumed engine now owns.
            self._stopped = True
            raise
        self._emit(
            SessionEnded(
                f"end/{iteration}",
                reason,
                self.best.version_id if self.best else None,
                self.best.score if self.best else None,
                self.score_kind,
            )
        )
        self.store.update_session(self.session_id, status=status, mode=self.mode)
        return Outcome(reason, self.best, self.score_kind, iteration)

    async def _iteration(self, i: int) -> None:
        self.plan = await self._propose(
            f"i{i}/plan", PLANNER, "plan", parsers.parse_plan, self.plan
        )
        source = await self._propose(
            f"i{i}/implement", IMPLEMENTER, "kernel", parsers.parse_kernel, self.kernel or ""
        )
        report = await self._new_version(f"i{i}/implement", source, "implementer")
        attempts: list[str] = []
        report = await self._debug(f"i{i}", report, attempts)
        if report["verdict"] == "accepted" and i == 1 and self.limits.edge_cases:
            # a kernel that fails an edge case goes to the debugger like any numerics failure
            report = await self._debug(
                f"i{i}", await self._edge_cases(f"i{i}/tester", report), attempts
            )
        if report["verdict"] != "accepted":
            self._feedback.append(
                f"iteration {i} ended with a rejected kernel: {self._failure_text(report)}"
            )
            self._restore_best()
            return
        await self._profile_version(f"i{i}/profile", report)
        self._diagnosis = await self._ask(
            f"i{i}/diagnose", PROFILER, self._context(), parsers.parse_diagnosis
        )
        self._emit(Note(f"i{i}/diagnose/note", f"i{i}/diagnose", PROFILER, self._diagnosis))
        await self._autotune(i)

    # -- steps ----------------------------------------------------------------------------------

    async def _debug(
        self, prefix: str, report: dict[str, Any], attempts: list[str]
    ) -> dict[str, Any]:
        """The debugger fixes what the harness rejects, up to the limit of attempts (shared by all
        the failures of one iteration; `attempts` keeps them)."""
        while report["verdict"] != "accepted" and len(attempts) < self.limits.max_debug_attempts:
            attempts.append(self._failure_text(report))
            step = f"{prefix}/debug{len(attempts)}"
            fixed = await self._propose(
                step,
                DEBUGGER,
                "kernel",
                parsers.parse_kernel,
                self.kernel or "",
                failure=self._failure(report),
                previous_attempts=tuple(attempts[:-1]),
            )
            report = await self._new_version(step, fixed, "debugger")
        return report

    async def _edge_cases(self, step: str, report: dict[str, Any]) -> dict[str, Any]:
        """The tester proposes edge-case configurations; the validated ones join every later
        evaluation, and the accepted kernel is evaluated again with them (the new report)."""
        self._start(step, TESTER)
        chosen = self.journal.recall(f"{step}/edges", EdgeCasesChosen)
        if chosen is None:  # a resumed session takes the validated ones as stored
            try:
                text = await self._ask(step, TESTER, self._context(), parsers.parse_edge_cases)
            except (
                LLMError
            ) as error:  # edge cases are extra checks: without them the session goes on
                self._emit(ErrorRaised(f"{step}/error", step, TESTER, str(error)))
                text = parsers.parse_edge_cases('{"configs": []}')
            accepted, rejected = await self.tools.validate_edge_configs(
                parsers.edge_proposals(text)
            )
            lines = [f"edge case {name} {params}" for name, params in accepted] + [
                f"rejected {r}" for r in rejected
            ]
            self._emit(
                Note(f"{step}/note", step, TESTER, "\n".join(lines) or "no edge cases proposed")
            )
            chosen = self._emit(
                EdgeCasesChosen(f"{step}/edges", step, [[n, p] for n, p in accepted], rejected)
            )
        self.tools.set_extra_configs([(name, params) for name, params in chosen.accepted])
        if not chosen.accepted or self.version_id is None:
            return report
        path = self.workspace.write(f"{step.replace('/', '-')}.py", self.kernel or "")
        return await self._evaluate(step, path, self.version_id)

    async def _propose(
        self,
        step: str,
        role: str,
        subject: str,
        parse: Callable[[str], str],
        previous: str,
        **context: Any,
    ) -> str:
        """Ask `role`, show the proposal at the gate, and return what was decided on; a rejection
        asks again with the reason."""
        for attempt in range(self.limits.max_rejections + 1):
            key = f"{step}.{attempt}" if attempt else step
            self._take_interventions(key)
            previous = self._current(subject) or previous
            self._start(key, role)
            text = await self._ask(key, role, replace(self._context(), **context), parse)
            decision = await self._decide(
                key, Proposal(key, role, subject, text, previous, diffs.summary(previous, text))
            )
            if decision.action == REJECT:
                self._feedback.append(
                    f"{role}'s proposal was rejected: {decision.feedback or 'no reason given'}"
                )
                continue
            # The engineer's edit is taken as written: the harness, not the parser, judges it.
            return decision.content if decision.action == EDIT and decision.content else text
        raise StepGivenUp(
            f"{step}: {self.limits.max_rejections + 1} proposals rejected; the session stops here"
        )

    async def _ask(self, key: str, role: str, ctx: StepContext, parse: Callable[[str], str]) -> str:
        stored = self.journal.recall(f"{key}/llm", LlmAnswer)
        if stored is not None:
            return parse(stored.text)
        request = build_request(role, ctx, model=self.model)
        pieces: list[str] = []
        flushed = [time.monotonic(), 0]

        def flush() -> None:
            if pieces:
                self._emit(TextChunk(f"{key}/text{flushed[1]}", key, role, "".join(pieces)))
                pieces.clear()
                flushed[:] = [time.monotonic(), flushed[1] + 1]

        answer = None
        async for chunk in self.client.stream(request, parse=parse):
            if isinstance(chunk, TextDelta):
                pieces.append(chunk.text)
                if (
                    time.monotonic() - flushed[0] > TEXT_FLUSH_S
                    or sum(map(len, pieces)) > TEXT_FLUSH_CHARS
                ):
                    flush()
            elif isinstance(chunk, UsageChunk):
                flush()
                self._record_usage(key, chunk)
            elif isinstance(chunk, Discarded):
                self._emit(
                    ErrorRaised(
                        f"{key}/discarded{chunk.attempt}",
                        key,
                        role,
                        f"attempt {chunk.attempt} discarded: {chunk.reason}",
                    )
                )
            elif isinstance(chunk, Done):
                answer = chunk.response
        assert answer is not None
        usage = answer.usage
        self._emit(
            LlmAnswer(
                f"{key}/llm", key, role, answer.text, usage.model, usage.tokens, usage.cost_usd
            )
        )
        return answer.parsed if isinstance(answer.parsed, str) else parse(answer.text)

    def _record_usage(self, key: str, chunk: UsageChunk) -> None:
        usage = chunk.usage
        self.store.record_llm_call(
            self.session_id,
            model=usage.model,
            provider=usage.provider,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost=usage.cost_usd or 0.0,
            latency_s=usage.latency_s,
        )
        tokens, cost = self.store.usage(self.session_id)
        self._emit(
            UsageReport(
                f"{key}/usage{chunk.attempt}",
                key,
                usage.model,
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cost_usd,
                usage.estimated,
                tokens,
                cost,
            )
        )

    async def _decide(self, key: str, proposal: Proposal) -> Decision:
        self._emit(ProposalMade(f"{key}/proposal", **asdict(proposal)))  # the same fields, stored
        stored = self.journal.recall(f"{key}/decision", DecisionMade)
        if stored is None:
            decision, by = await self.gates.decide(proposal)
            stored = self._emit(
                DecisionMade(
                    f"{key}/decision",
                    key,
                    decision.action,
                    decision.content,
                    decision.feedback,
                    decision.mode,
                    by,
                )
            )
        if stored.action == HANDOFF:
            self._set_mode(key, stored.mode or "auto")
        action = APPROVE if stored.action == HANDOFF else stored.action
        return Decision(action, stored.content, stored.feedback)

    async def _new_version(self, step: str, source: str, origin: str) -> dict[str, Any]:
        """Store `source` as the next kernel version, make it current, evaluate it."""
        created = self.journal.recall(f"{step}/version", VersionCreated)
        if created is None:
            version = self.store.add_kernel_version(
                self.session_id, source, self.plan, parent_id=self.version_id
            )
            created = self._emit(
                VersionCreated(f"{step}/version", step, version.id, version.number, origin)
            )
        self.kernel, self.version_id = source, created.version_id
        return await self._evaluate(
            step, self.workspace.write(f"v{created.number}.py", source), created.version_id
        )

    async def _evaluate(self, step: str, path: Path, version_id: int) -> dict[str, Any]:
        """Evaluate the kernel at `path` (version `version_id`) with the harness, once per step."""
        stored = self.journal.recall(f"{step}/eval", EvaluationDone)
        if stored is not None:
            self._last_report = stored.report
            return stored.report
        loop = asyncio.get_running_loop()

        def on_check(check: Any) -> None:  # from the harness's thread: log it on the loop
            loop.call_soon_threadsafe(
                self._emit, Note(f"{step}/check/{check.name}", step, "tester", format_check(check))
            )

        self._start(f"{step}/test", "tester")
        report = await self.tools.evaluate(path, on_check)
        self.store.record_evaluation(version_id, report)
        failure = self._failure(report)
        self._emit(
            EvaluationDone(
                f"{step}/eval",
                step,
                version_id,
                report["verdict"],
                str(failure) if failure else None,
                report,
            )
        )
        self._last_report = report
        return report

    async def _profile_version(self, step: str, report: dict[str, Any]) -> None:
        """Profile the current (accepted) kernel and keep it if it is the best so far."""
        assert self.kernel is not None and self.version_id is not None
        score, self._current_estimate = await self._profile(
            step, self.kernel, self.version_id, report
        )
        self._consider(score)

    async def _profile(
        self, step: str, source: str, version_id: int | None, report: dict[str, Any] | None
    ) -> tuple[Score, Score]:
        """(the score the session ranks by, the performance model's estimate)."""
        stored = self.journal.recall(f"{step}/profile", ProfileDone)
        if stored is None:
            self._start(step, "profiler")
            path = self.workspace.write(f"profiles/{step.replace('/', '-')}.py", source)
            summary, text, error = await self.tools.profile(path, estimate_only=version_id is None)
            score = (measured_score(report) if report else None) or (
                estimated_score(summary, self.tools.target)
                if summary
                else Score(None, "no profile")
            )
            if summary is not None and version_id is not None:
                self.store.record_profile(version_id, summary)
            stored = self._emit(
                ProfileDone(
                    f"{step}/profile",
                    step,
                    version_id,
                    score.value,
                    score.kind,
                    dict(summary or {}, text=text),
                    error,
                )
            )
        if version_id is not None:
            self._last_profile = (stored.summary, stored.summary.get("text", ""))
        estimate = (
            estimated_score(stored.summary, self.tools.target)
            if stored.error is None
            else Score(None, "")
        )
        return Score(stored.score, stored.score_kind), estimate

    def _consider(self, score: Score) -> None:
        """Rank the current accepted kernel; scores of another kind are never compared."""
        assert self.kernel is not None and self.version_id is not None
        if not self.score_kind and score.value is not None:
            self.score_kind = score.kind
        comparable = score.value if score.kind == self.score_kind else None
        number = next(
            v.number for v in self.store.kernel_versions(self.session_id) if v.id == self.version_id
        )
        if self.best is None or significantly_better(comparable, self.best.score, 0.0):
            self.best = Best(self.version_id, number, self.kernel, comparable)

    async def _autotune(self, i: int) -> None:
        """Estimate each neighbouring setting of the declared tunables with the performance model;
        propose the best that beats the current kernel; the harness must accept it."""
        assert self.kernel is not None
        base, tunables = self.kernel, find_tunables(self.kernel)
        step = f"i{i}/tune"
        candidates = neighbours(tunables)[: self.limits.tune_candidates]
        if not candidates:
            self._emit(Note(f"{step}/note", step, "autotuner", "no tunables to search"))
            return
        # Candidates are ranked by the model against the current kernel's estimate (of the same
        # kind); the harness, and on a TPU the timing, decide whether the winner is kept.
        current = self._current_estimate
        scored: list[tuple[float, dict[str, int]]] = []
        for n, values in enumerate(candidates):
            _, estimate = await self._profile(
                f"{step}/c{n}", set_tunables(base, values), None, None
            )
            if estimate.value is not None and estimate.kind == current.kind:
                scored.append((estimate.value, values))
        scored.sort(key=lambda item: -item[0])
        lines = [f"{describe_change(tunables, values)}: {value:.3g}" for value, values in scored]
        shown = "?" if current.value is None else f"{current.value:.3g}"
        self._emit(
            Note(
                f"{step}/note",
                step,
                "autotuner",
                f"{len(candidates)} settings estimated ({current.kind}); current kernel {shown}\n"
                + "\n".join(lines),
            )
        )
        winners = [
            (v, values)
            for v, values in scored
            if significantly_better(v, current.value, self.limits.min_improvement)
        ]
        for n, (_, values) in enumerate(winners[: self.limits.tune_evaluations]):
            key = f"{step}/apply{n}"
            self._take_interventions(key)
            self._start(key, "autotuner")
            proposed = set_tunables(base, values)
            decision = await self._decide(
                key,
                Proposal(
                    key, "autotuner", "kernel", proposed, base, describe_change(tunables, values)
                ),
            )
            if decision.action == REJECT:
                self._feedback.append(
                    f"autotuner's change was rejected: {decision.feedback or 'no reason given'}"
                )
                continue
            chosen = decision.content if decision.action == EDIT and decision.content else proposed
            report = await self._new_version(key, chosen, "autotuner")
            if report["verdict"] == "accepted":
                await self._profile_version(f"{key}/profile", report)
                return
            self._restore_best()

    # -- state ------------------------------------------------------------------------------------

    def _take_interventions(self, key: str) -> None:
        """Apply the engineer's edits and messages at this step boundary: stored ones on replay,
        then any queued since."""
        n = 0
        while (stored := self.journal.recall(f"{key}/intervention{n}", Intervention)) is not None:
            self._apply(key, stored)
            n += 1
        while self._queued:
            subject, content = self._queued.pop(0)
            self._apply(
                key, self._emit(Intervention(f"{key}/intervention{n}", key, subject, content))
            )
            n += 1

    def _apply(self, key: str, intervention: Intervention) -> None:
        if intervention.subject == "mode":
            self._set_mode(key, intervention.content)
        elif intervention.subject == "plan":
            self.plan = intervention.content
        elif intervention.subject == "kernel":
            version = self.store.add_kernel_version(
                self.session_id, intervention.content, self.plan, parent_id=self.version_id
            )
            self.kernel, self.version_id = intervention.content, version.id
            self._feedback.append("the engineer edited the kernel: start from the current kernel")
        else:
            self._feedback.append(intervention.content)

    def _set_mode(self, key: str, mode: str) -> None:
        if mode == self.mode:
            return
        if self.gates.gate.name != self._gate_for(mode).name:
            self.gates.swap(self._gate_for(mode))
        self.mode = mode
        self._emit(ModeChanged(f"{key}/mode", key, mode))
        self.store.update_session(self.session_id, mode=mode)

    def _restore_best(self) -> None:
        """Go on from the best accepted kernel, never from a rejected one."""
        if self.best is not None:
            self.kernel, self.version_id = self.best.source, self.best.version_id

    def _current(self, subject: str) -> str:
        return self.plan if subject == "plan" else self.kernel or ""

    def _context(self) -> StepContext:
        report = self._last_report
        summary, text = self._last_profile
        return StepContext(
            task_dir=str(self.task.folder),
            task_id=self.task.task_id,
            target=self.tools.target,
            iteration=_iteration_of(self.step),
            task_facts=self.task_facts,
            kernel=self.kernel,
            plan=self.plan or None,
            feedback=tuple(self._feedback[-8:]),
            evaluation=None if report is None else self._evaluation_text(report),
            profile=summary,
            profile_text=text or None,
            diagnosis=self._diagnosis,
        )

    def _start(self, key: str, role: str) -> None:
        self.step = key
        self._emit(StepStarted(f"{key}/start", key, role, _iteration_of(key), f"{role} ({key})"))

    def _emit(self, event: Any) -> Any:
        return event if self._stopped else self.journal.emit(event)

    @staticmethod
    def _failure(report: dict[str, Any]) -> Failure | None:
        failed = next((c for c in report["checks"] if c["status"] == "fail"), None)
        return None if failed is None else Failure(failed["name"], failed["detail"])

    def _failure_text(self, report: dict[str, Any]) -> str:
        failure = self._failure(report)
        return "no check decided" if failure is None else str(failure)

    @staticmethod
    def _evaluation_text(report: dict[str, Any]) -> str:
        lines = [f"verdict: {report['verdict']}"]
        lines += [f"{c['status']} {c['name']}: {c['detail']}" for c in report["checks"]]
        lines += [t["label"] for t in report.get("timings", [])]
        return "\n".join(lines)


def _iteration_of(step: str) -> int:
    """The iteration a step key belongs to ("i2/debug1" -> 2); 0 for steps outside the loop."""
    return int(step[1:].split("/")[0]) if step.startswith("i") else 0
