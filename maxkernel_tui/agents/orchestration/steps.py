"""The step primitives of a session, in one place: propose (ask a role, decide at the gate), ask,
decide, new version, evaluate, profile, debug, edge cases, and the engineer's interventions taken
at step boundaries. The HITL/Auto loop (engine.py) and a search's expansion (search/expansion.py)
drive them. No jax here.

Every result that costs something (a model answer, a decision, an evaluation, a profile) is an
event stored under the step's key (keys.py); a step that finds its event stored reuses it, which
is what makes resuming a session cheap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any, TypeVar

from maxkernel_tui.agents.llm.errors import LLMError
from maxkernel_tui.agents.orchestration import diffs, keys
from maxkernel_tui.agents.orchestration.asking import ModelCalls, Parse
from maxkernel_tui.agents.orchestration.engineer import EngineerEdit, EngineerEdits, Revert
from maxkernel_tui.agents.orchestration.events import (
    DecisionMade,
    EarlierVerdict,
    EdgeCasesChosen,
    ErrorRaised,
    EvaluationDone,
    Intervention,
    ModeChanged,
    Note,
    ProfileDone,
    ProposalMade,
    SessionEvent,
    StepStarted,
    VersionCreated,
)
from maxkernel_tui.agents.orchestration.fingerprint import kernel_hash
from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    HANDOFF,
    REJECT,
    Decider,
    Decision,
    Gate,
    GateHolder,
    Proposal,
    Subject,
)
from maxkernel_tui.agents.orchestration.journal import Journal
from maxkernel_tui.agents.orchestration.limits import DEFAULT_LIMITS, LoopLimits, NothingNew
from maxkernel_tui.agents.orchestration.repeats import Repeats
from maxkernel_tui.agents.orchestration.report_text import evaluation_text, failure_of, failure_text
from maxkernel_tui.agents.orchestration.scoring import (
    Score,
    estimated_score,
    measured_score,
    significantly_better,
)
from maxkernel_tui.agents.orchestration.tools import Client, Tools
from maxkernel_tui.agents.orchestration.verdicts import VerdictBook
from maxkernel_tui.agents.orchestration.workspace import Workspace
from maxkernel_tui.agents.roles import parsers
from maxkernel_tui.agents.roles.context import (
    Failure,
    StepContext,
    TurnedDown,
    message_feedback,
    rejection_feedback,
)
from maxkernel_tui.agents.roles.prompts import DEBUGGER, TESTER, Role
from maxkernel_tui.agents.tools.assignment import RolePlan
from maxkernel_tui.agents.tools.runner import Toolbox
from maxkernel_tui.kernels.evaluation.timing.measured_choice import Timer
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import (
    ACCEPTED,
    REJECTED,
    Check,
    EvalReport,
    format_check,
)
from maxkernel_tui.kernels.service.service import KernelSource, ProfileResult
from maxkernel_tui.store.kinds import Mode, SessionStatus

E = TypeVar("E", bound=SessionEvent)


class Steps:
    """One line of work on a session: its current plan and kernel, and the steps that move it."""

    def __init__(
        self,
        *,
        journal: Journal,
        client: Client,
        tools: Tools,
        workspace: Workspace,
        gates: Callable[[Mode], Gate],
        mode: Mode,
        task_facts: str,
        limits: LoopLimits = DEFAULT_LIMITS,
        model: str | None = None,
        timer: Timer | None = None,
        roles: RolePlan | None = None,
        toolbox: Toolbox | None = None,
        verdicts: VerdictBook | None = None,
    ) -> None:
        """`timer`: the device's, on a TPU VM: the autotuner then times its candidates.
        `roles`: each role's model and tools; `toolbox`: what carries out their tool calls
        (None: no tools are offered). `verdicts`: the session's book of judged kernels (a
        search's expansions share one); by default one read from the journal."""
        self.journal, self.client, self.tools, self.workspace = journal, client, tools, workspace
        self.store, self.session_id = journal.store, journal.session_id
        self.task = tools.task
        self.parse_kernel = parsers.kernel_parser(self.task.entry_points)
        self.verdicts = verdicts or VerdictBook(tools.task, tools.target, journal.history())
        self.repeats = Repeats(journal, self.verdicts, limits, self._emit)
        self.edits = EngineerEdits()
        # a revert of the engineer's change the auto gate approved, and its source: judged
        # against the engineer's version once evaluated
        self._revert_pending: tuple[Revert, str] | None = None
        self._gate_for = gates  # mode -> the gate that decides in that mode
        self.gates = GateHolder(gates(mode))
        self.mode = mode
        self.limits, self.model, self.task_facts = limits, model, task_facts
        self.timer = timer
        self.calls = ModelCalls(journal, client, self._emit, model, roles=roles, toolbox=toolbox)
        self.plan = ""
        self.kernel: str | None = None
        self.version_id: int | None = None
        self.step = ""
        self.feedback: list[str] = []
        # interventions waiting for the next step boundary
        self._queued: list[tuple[Subject, str]] = []
        self.last_report: EvalReport | None = None
        self.last_profile: tuple[ProfileSummary | None, str] = (None, "")
        self.diagnosis: str | None = None
        self.strategy: str | None = None  # a search expansion's strategy, by name
        self._stopped = False

    # -- what the UI calls ------------------------------------------------------------------

    def hand_off(self, mode: Mode) -> None:
        """Swap the gate now (a proposal waiting on the interactive gate is approved); the mode
        change is logged at the next step boundary, like every intervention."""
        self.gates.swap(self._gate_for(mode))
        self._queued.append((Subject.MODE, mode))

    def intervene(self, subject: Subject, content: str) -> None:
        """The engineer's edit of the kernel or plan, or a chat message; taken at the next step."""
        if subject not in (Subject.KERNEL, Subject.PLAN, Subject.MESSAGE):
            raise ValueError(f"unknown intervention {subject!r}")
        self._queued.append((subject, content))

    # -- steps --------------------------------------------------------------------------------

    async def propose(
        self,
        step: str,
        role: Role,
        subject: Subject,
        parse: Parse,
        previous: str,
        *,
        failure: Failure | None = None,
        previous_attempts: tuple[str, ...] = (),
    ) -> str:
        """Ask `role`, show the proposal at the gate, and return what was decided on; a rejection
        asks again with the reason and the proposal turned down. A kernel already turned down is
        not shown: the role is asked for another. When it has none, Auto ends (NothingNew); in
        HITL the engineer is asked what now (keep the current one, edit it, or say what to try),
        and the session stays open."""
        repeats = attempt = 0
        repeated: str | None = None  # the turned-down kernel the role is asked to move past
        turned_down: list[TurnedDown] = []  # this step's, for the role's next request
        while True:
            key = keys.retry(step, attempt)
            attempt += 1
            self.take_interventions(key)
            previous = self._current(subject) or previous
            self.start(key, role)
            ctx = replace(self.context(), failure=failure, previous_attempts=previous_attempts)
            ctx = replace(ctx, turned_down=tuple(turned_down), kernel=repeated or ctx.kernel)
            text = await self.calls.ask(key, role, ctx, parse)
            rejection = self.repeats.rejection(key, subject, text)
            if rejection is not None:
                repeats += 1
                turned_down.append(TurnedDown(text, rejection))
                # asked again from the kernel it repeated: an agent that walks its kernels in
                # order (the built-in one) moves past it, a model reads why it was rejected
                failure, repeated = Failure("repeat", rejection), text
                previous_attempts = (*previous_attempts, rejection)
                self.feedback.append(
                    f"{role} proposed a kernel already turned down ({rejection}): propose a "
                    "different one"
                )
                why = self.repeats.nothing_new(key, role, rejection, repeats)
                if why is None:
                    continue
                if self.mode != Mode.HITL:  # no engineer to ask what now
                    raise NothingNew(f"{key}: the {role} has nothing new ({why})")
                # HITL: the engineer decides what comes next, at the gate
                ask = keys.nothing_new(key)
                offer = Proposal(ask, role, subject, previous, previous, why, nothing_new=True)
                decision = await self.decide(ask, offer)
                if decision.action == EDIT and decision.content:
                    return decision.content  # theirs
                if decision.action == APPROVE and previous.strip():
                    return previous  # go on with the current kernel or plan
                if decision.action == REJECT and decision.feedback:  # what to try
                    self.feedback.append(message_feedback(decision.feedback))
                repeats, repeated = 0, None  # the role is asked again
                continue
            decision = await self.decide(
                key, Proposal(key, role, subject, text, previous, diffs.summary(previous, text))
            )
            if decision.action == REJECT:
                reason = decision.feedback or "no reason given"
                self.feedback.append(rejection_feedback(role, reason))
                turned_down.append(TurnedDown(text, f"rejected by the engineer: {reason}"))
                if subject == Subject.KERNEL:
                    self.verdicts.refuse(text, reason)
                continue
            # The engineer's edit is taken as written: the harness, not the parser, judges it.
            return decision.content if decision.action == EDIT and decision.content else text

    async def ask(self, key: str, role: Role, ctx: StepContext, parse: Parse) -> str:
        return await self.calls.ask(key, role, ctx, parse)

    async def decide(self, key: str, proposal: Proposal) -> Decision:
        """The gate's decision on `proposal` (the stored one on replay); a hand-off approves.
        A kernel that undoes the engineer's change is flagged, and always goes to the gate."""
        revert = None
        if proposal.subject == Subject.KERNEL:
            revert = self.edits.reverted_by(proposal.content)
        if revert is not None:
            flag = revert.words()
            proposal = replace(proposal, reverts=flag, summary=f"{proposal.summary} ⚠ {flag}")
        self._emit(ProposalMade(keys.sub(key, "proposal"), **asdict(proposal)))
        stored = self.journal.recall(keys.sub(key, "decision"), DecisionMade)
        if stored is None and proposal.unchanged and revert is None:
            # Nothing new to judge (iteration 2's planner often repeats the plan): kept without
            # asking, and said so, rather than presented as new work.
            unchanged = DecisionMade(keys.sub(key, "decision"), key, APPROVE, by=Decider.UNCHANGED)
            stored = self._emit(unchanged)
        if stored is None:
            decision, by = await self.gates.decide(proposal)
            stored = self._emit(
                DecisionMade(
                    keys.sub(key, "decision"),
                    key,
                    decision.action,
                    decision.content,
                    decision.feedback,
                    decision.mode,
                    by,
                )
            )
        if stored.action == HANDOFF:
            self.set_mode(key, stored.mode or Mode.AUTO)
        action = APPROVE if stored.action == HANDOFF else stored.action
        self._decided(key, proposal, stored, revert)
        return Decision(action, stored.content, stored.feedback)

    def _decided(
        self, key: str, proposal: Proposal, stored: DecisionMade, revert: Revert | None
    ) -> None:
        """What a kernel decision means for the engineer's changes: an edit binds; a revert the
        engineer approved lets the change go; one approved by the auto gate must beat it."""
        if proposal.subject != Subject.KERNEL:
            return
        if stored.action == EDIT and stored.content:
            edit = EngineerEdit(key, proposal.content, stored.content)
            self.edits.add(edit)
            self.feedback.append(edit.feedback())
        elif revert is not None and stored.action in (APPROVE, HANDOFF):
            if stored.by == Decider.AUTO:
                self._revert_pending = (revert, proposal.content)
            else:
                self.edits.let_go(revert.edit)

    async def new_version(self, step: str, source: str, origin: Role) -> EvalReport:
        """Store `source` as the next kernel version, make it current, evaluate it. A kernel
        judged before is neither stored again nor evaluated: its earlier verdict stands."""
        earlier = self.journal.recall(keys.sub(step, "earlier"), EarlierVerdict)
        created = self.journal.recall(keys.sub(step, "version"), VersionCreated)
        if earlier is None and created is None:
            earlier = self._earlier(step, source)
        if earlier is not None:
            self.kernel = self.store.kernel_version(earlier.version_id).source
            self.version_id = earlier.version_id
            self.last_report = earlier.report
            self.edits.stored(source, earlier.version_id, earlier.version_number)
            return await self._judge_revert(step, source, self.last_report)
        if created is None:
            version = self.store.add_kernel_version(
                self.session_id, source, self.plan, parent_id=self.version_id
            )
            created = self._emit(
                VersionCreated(keys.sub(step, "version"), step, version.id, version.number, origin)
            )
        self.kernel, self.version_id = source, created.version_id
        self.edits.stored(source, created.version_id, created.number)
        kernel = self.workspace.kept(f"v{created.number}.py", source)
        report = await self.evaluate(step, kernel, created.version_id)
        return await self._judge_revert(step, source, report)

    async def _judge_revert(self, step: str, source: str, report: EvalReport) -> EvalReport:
        """A kernel the auto gate approved though it undoes the engineer's change stays only
        with a better verdict than the engineer's version (accepted over rejected; between two
        accepted ones, a significantly better score); else the engineer's version is current
        again, and its report is the step's."""
        pending, self._revert_pending = self._revert_pending, None
        if pending is None or pending[1] != source:
            return report
        revert = pending[0]
        edit = revert.edit
        theirs = await self._engineer_report(step, edit)
        better = await self._beats(step, report, edit, theirs)
        ours = "the agent's" if self.version_id is None else f"v{self._number(self.version_id)}"
        if better:
            self.edits.let_go(edit)
            text = f"{ours} {revert.words()} and does better: it stays"
        else:
            assert edit.version_id is not None and theirs is not None
            self.kernel, self.version_id, self.last_report = edit.after, edit.version_id, theirs
            text = f"{ours} {revert.words()} without a better verdict: {edit.name()} stays current"
            report = theirs
        self._emit(Note(keys.sub(step, "revert"), step, Role.ENGINE, text))
        return report

    async def _beats(
        self, step: str, ours: EvalReport, edit: EngineerEdit, theirs: EvalReport | None
    ) -> bool:
        """The current kernel's verdict beats that of the engineer's version: accepted over
        rejected over none; between two accepted, a significantly better score of one kind."""
        rank = {ACCEPTED: 2, REJECTED: 1}
        mine, other = rank.get(ours.verdict, 0), 0 if theirs is None else rank[theirs.verdict]
        if mine != other or ours.verdict != ACCEPTED:
            return mine > other
        assert self.kernel is not None and self.version_id is not None and theirs is not None
        score, _ = await self.profile(keys.sub(step, "ours"), self.kernel, self.version_id, ours)
        engineer, _ = await self.profile(
            keys.sub(step, "engineer"), edit.after, edit.version_id, theirs
        )
        return score.kind == engineer.kind and significantly_better(
            score.value, engineer.value, self.limits.min_improvement
        )

    async def _engineer_report(self, step: str, edit: EngineerEdit) -> EvalReport | None:
        """The verdict of the engineer's version: the earlier one, or an evaluation now."""
        judged = self.verdicts.earlier(edit.after)
        if judged is not None:
            return judged.report
        if edit.version_id is None:
            return None
        kernel = self.workspace.kept(f"v{edit.number}.py", edit.after)
        current = self.last_report
        report = await self.evaluate(keys.sub(step, "engineer"), kernel, edit.version_id)
        self.last_report = current
        return report

    def _earlier(self, step: str, source: str) -> EarlierVerdict | None:
        judged = self.verdicts.earlier(source)
        if judged is None:
            return None
        number = judged.version_number or self._number(judged.version_id)
        event = EarlierVerdict(
            keys.sub(step, "earlier"),
            step,
            judged.version_id,
            number,
            judged.verdict,
            judged.failure,
            judged.step,
            judged.report,
        )
        return self._emit(event)

    def _number(self, version_id: int) -> int:
        return self.store.kernel_version(version_id).number

    async def evaluate(
        self, step: str, kernel: KernelSource, version_id: int, judged: EvalReport | None = None
    ) -> EvalReport:
        """Evaluate `kernel` (version `version_id`) with the harness, once per step.
        With `judged` (the version's full report) only its edge cases are evaluated, and the
        result is `judged` joined with them."""
        stored = self.journal.recall(keys.sub(step, "eval"), EvaluationDone)
        if stored is not None:
            self.last_report = stored.report
            return self.last_report
        loop = asyncio.get_running_loop()

        def on_check(check: Check) -> None:  # from the harness's thread: log it on the loop
            name = f"check/{check.name}{'/backward' if check.of_backward else ''}"  # both kept
            note = Note(keys.sub(step, name), step, TESTER, format_check(check))
            loop.call_soon_threadsafe(self._emit, note)

        self.start(keys.sub(step, "test"), TESTER)
        report = await self.tools.evaluate(kernel, on_check, edges_only=judged is not None)
        if judged is not None:
            report = judged.with_edge_pass(report)
        data = report.to_json()
        source = kernel.text
        self.store.record_evaluation(version_id, data)
        failure = failure_of(report)
        done = self._emit(
            EvaluationDone(
                keys.sub(step, "eval"),
                step,
                version_id,
                report.verdict,
                None if failure is None else str(failure),
                report,
                report.executor_node,
                self.verdicts.key(source),
                self._number(version_id),
                kernel_hash(source),
            )
        )
        self.verdicts.record(done)
        self.last_report = report
        return report

    async def debug(self, prefix: str, report: EvalReport, attempts: list[str]) -> EvalReport:
        """The debugger fixes what the harness rejects, up to the limit of attempts (shared by all
        the failures of one iteration; `attempts` keeps them), or until it has nothing new."""
        while report.verdict != ACCEPTED and len(attempts) < self.limits.max_debug_attempts:
            attempts.append(failure_text(report))
            step = keys.debug(prefix, len(attempts))
            try:
                fixed = await self.propose(
                    step,
                    DEBUGGER,
                    Subject.KERNEL,
                    self.parse_kernel,
                    self.kernel or "",
                    failure=failure_of(report),
                    previous_attempts=tuple(attempts[:-1]),
                )
            except NothingNew:  # said so in the log: the kernel stays rejected
                return report
            report = await self.new_version(step, fixed, DEBUGGER)
        return report

    async def edge_cases(self, step: str, report: EvalReport) -> EvalReport:
        """The tester proposes edge-case configurations; the validated ones join every later
        evaluation, and the accepted kernel is evaluated on them (its report, with the `edge`
        check added: check, held-out and production shapes were judged already)."""
        self.start(step, TESTER)
        chosen = self.journal.recall(keys.sub(step, "edges"), EdgeCasesChosen)
        if chosen is None:  # a resumed session takes the validated ones as stored
            chosen = await self._choose_edge_cases(step)
        configs = [(name, params) for name, params in chosen.accepted]
        self.tools.set_extra_configs(configs)
        self.verdicts.set_extra_configs(configs)
        if not chosen.accepted or self.version_id is None:
            return report
        kernel = self.workspace.kept(keys.file_name(step), self.kernel or "")
        return await self.evaluate(step, kernel, self.version_id, judged=report)

    async def _choose_edge_cases(self, step: str) -> EdgeCasesChosen:
        try:
            text = await self.calls.ask(step, TESTER, self.context(), parsers.parse_edge_cases)
        except LLMError as error:  # edge cases are extra checks: without them the session goes on
            self._emit(ErrorRaised(keys.sub(step, "error"), step, TESTER, str(error)))
            text = parsers.parse_edge_cases('{"configs": []}')
        accepted, rejected = await self.tools.validate_edge_configs(parsers.edge_proposals(text))
        lines = [f"edge case {name} {params}" for name, params in accepted]
        lines += [f"rejected {r}" for r in rejected]
        shown = "\n".join(lines) or "no edge cases proposed"
        self._emit(Note(keys.sub(step, "note"), step, TESTER, shown))
        pairs: list[list[Any]] = [[n, p] for n, p in accepted]
        return self._emit(EdgeCasesChosen(keys.sub(step, "edges"), step, pairs, rejected))

    async def profile(
        self, step: str, source: str, version_id: int | None, report: EvalReport | None
    ) -> tuple[Score, Score]:
        """(the score the session ranks by, the performance model's estimate). Without a
        `version_id` the kernel is only estimated (an autotune candidate)."""
        stored = self.journal.recall(keys.sub(step, "profile"), ProfileDone)
        if stored is None:
            self.start(step, Role.PROFILER)
            kernel = self.workspace.kept(f"profiles/{keys.file_name(step)}", source)
            result = await self.tools.profile(kernel, estimate_only=version_id is None)
            stored = self._emit(self._profiled(step, version_id, report, result))
        if version_id is not None:
            self.last_profile = (stored.summary, stored.text)
            if stored.score is not None:  # here, not in _profiled: a replayed profile counts too
                self.store.record_score(
                    version_id, stored.score, stored.score_kind, stored.score_also
                )
        summary = stored.summary
        estimate = Score(None, "") if summary is None else self._estimate(summary)
        return Score(stored.score, stored.score_kind, stored.score_also), estimate

    def _profiled(
        self, step: str, version_id: int | None, report: EvalReport | None, result: ProfileResult
    ) -> ProfileDone:
        summary = result.summary
        measured = measured_score(report, summary, self.tools.target) if report else None
        score = measured or (
            Score(None, "no profile") if summary is None else self._estimate(summary)
        )
        if summary is not None and version_id is not None:
            self.store.record_profile(version_id, summary.to_json())
        ref = keys.sub(step, "profile")
        text = result.text
        return ProfileDone(
            ref, step, version_id, score.value, score.kind, summary, result.error, text, score.also
        )

    def _estimate(self, summary: ProfileSummary) -> Score:
        return estimated_score(summary, self.tools.target, self.limits.rank_by)

    def take_interventions(self, key: str) -> None:
        """Apply the engineer's edits and messages at this step boundary: stored ones on replay,
        then any queued since."""
        n = 0
        while (stored := self.journal.recall(self._intervention(key, n), Intervention)) is not None:
            self._apply(key, stored)
            n += 1
        while self._queued:
            subject, content = self._queued.pop(0)
            event = Intervention(self._intervention(key, n), key, subject, content)
            self._apply(key, self._emit(event))
            n += 1

    @staticmethod
    def _intervention(key: str, n: int) -> str:
        return keys.sub(key, f"intervention{n}")

    def _apply(self, key: str, intervention: Intervention) -> None:
        if intervention.subject == Subject.MODE:
            self.set_mode(key, Mode(intervention.content))
        elif intervention.subject == Subject.PLAN:
            self.plan = intervention.content
        elif intervention.subject == Subject.KERNEL:
            version = self.store.add_kernel_version(
                self.session_id, intervention.content, self.plan, parent_id=self.version_id
            )
            edit = EngineerEdit(
                key, self.kernel or "", intervention.content, version.id, version.number
            )
            self.edits.add(edit)
            self.kernel, self.version_id = intervention.content, version.id
            self.feedback.append(
                f"{edit.feedback()}\nstart from the current kernel (the engineer's)"
            )
        else:
            self.feedback.append(message_feedback(intervention.content))

    def set_mode(self, key: str, mode: Mode) -> None:
        if mode == self.mode:
            return
        if self.gates.gate.name != self._gate_for(mode).name:
            self.gates.swap(self._gate_for(mode))
        self.mode = mode
        self._emit(ModeChanged(keys.sub(key, "mode"), key, mode))
        self.store.update_session(self.session_id, mode=mode)

    def set_status(self, status: SessionStatus) -> None:
        """The session's status in the store (with its mode): only the engine writes it."""
        self.store.update_session(self.session_id, status=status, mode=self.mode)

    def _current(self, subject: Subject) -> str:
        return self.plan if subject == Subject.PLAN else self.kernel or ""

    def context(self) -> StepContext:
        report = self.last_report
        summary, text = self.last_profile
        return StepContext(
            task_dir=str(self.task.folder),
            task_id=self.task.task_id,
            entry_point=self.task.entry_points[0],
            gradients=self.task.gradients,
            target=self.tools.target,
            iteration=keys.iteration_of(self.step),
            task_facts=self.task_facts,
            kernel=self.kernel,
            plan=self.plan or None,
            feedback=tuple(self.feedback[-8:]),
            evaluation=None if report is None else evaluation_text(report),
            profile=None if summary is None else summary.to_json(),  # for the agent's worker
            profile_text=text or None,
            diagnosis=self.diagnosis,
            strategy=self.strategy,
        )

    def start(self, key: str, role: Role) -> None:
        self.step = key
        iteration = keys.iteration_of(key)
        self._emit(StepStarted(keys.sub(key, "start"), key, role, iteration, f"{role} ({key})"))

    def _emit(self, event: E) -> E:
        # once stopped, work still finishing in threads must not log into the session, which a
        # resumed engine now owns
        return event if self._stopped else self.journal.emit(event)
