"""The workbench: plan, editable source, tests, profile and the agents of one task, on one screen.

The engineer edits, evaluates and profiles by hand, or runs the agents (F5): in HITL each
proposal waits here for a key, F2 hands the session to Auto and back, Esc stops the running
step. Behind the screen one `WorkbenchSession` (services/) owns the tools, the store, the engine
and every action; this screen turns keys into its actions and routes what comes back to the
panes as one typed message per pane (pane_messages.py), which each pane handles itself. Each
pane is a widget of its own (plan_pane, source_pane, tests_pane, profile_pane, agent_pane).
This process never imports jax: kernels run in worker processes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.reactive import reactive
from textual.widgets import Footer, Input, Static

from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    REJECT,
    Decision,
    Proposal,
    Subject,
)
from maxkernel_tui.agents.roles.role import Role
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.listing import config_label
from maxkernel_tui.kernels.report.checks import Check
from maxkernel_tui.kernels.starter import starter_source
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.screens.agent_pane import AgentPane
from maxkernel_tui.screens.pane_messages import (
    AgentsMessage,
    ProfileMessage,
    SourceMessage,
    StatusMessage,
    TestsMessage,
)
from maxkernel_tui.screens.plan_pane import PlanPane
from maxkernel_tui.screens.profile_pane import ProfilePane
from maxkernel_tui.screens.source_pane import SourcePane
from maxkernel_tui.screens.tests_pane import TestsPane
from maxkernel_tui.screens.workbench_evidence import ShowsEvidence
from maxkernel_tui.screens.worker_errors import ShowsWorkerErrors
from maxkernel_tui.services.workbench_session import HarnessFactory, WorkbenchSession
from maxkernel_tui.store.kinds import Mode
from maxkernel_tui.visible import visible

if (
    TYPE_CHECKING
):  # the agents' engine and events load when they first run, not with the first frame
    from maxkernel_tui.agents.llm.provider import Provider
    from maxkernel_tui.agents.search.launch import OpenSearch
    from maxkernel_tui.services.kernel_file import Kept
    from maxkernel_tui.services.search_feed import SearchFeed
    from maxkernel_tui.services.workbench_session import AgentUpdate

WARM_AFTER_S = 1.0  # after the first frame, before a first ctrl+e is likely
GRAPH_EVALUATIONS = 12  # a search handed off from the workbench stops after this many evaluations
IDLE = "idle"
DECISIONS = ("approve", "reject", "edit_proposal")  # the actions of a waiting proposal's keys


class WorkbenchScreen(ShowsWorkerErrors, ShowsEvidence):
    CSS_PATH = "workbench.tcss"
    # priority: the code editor would otherwise take these keys (ctrl+e is its end-of-line). The
    # proposal's single keys are not: the editor is read-only while a proposal waits, so they
    # reach the screen, and type as usual otherwise.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f5", "agents", "Agents", priority=True),
        Binding("a", "approve", "Approve proposal", show=False),
        Binding("e", "edit_proposal", "Edit proposal (ctrl+s submits)", show=False),
        Binding("r", "reject", "Reject proposal (with a reason)", show=False),
        Binding("c", "card", "Evidence card of the proposal", show=False),
        Binding("f7", "card", "Evidence card", show=False, priority=True),
        Binding("f2", "toggle_auto", "HITL⇄Auto", priority=True),
        Binding("f3", "graph", "Graph", priority=True),
        Binding("escape", "interrupt", "Stop", priority=True),
        Binding("ctrl+e", "evaluate", "Evaluate", priority=True),
        Binding("ctrl+o", "profile", "Profile", priority=True),
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("f4", "edit_plan", "Edit plan", priority=True),
        Binding("f6", "previous_version", "Undo version", priority=True),
        # ctrl+g too: a browser tab (`serve`) never hands the page ctrl+t, its new-tab key
        Binding("ctrl+t,ctrl+g", "message", "Message", priority=True),
        Binding("ctrl+q", "app.quit", "Quit", priority=True),
    ]
    mode: reactive[Mode] = reactive(Mode.HITL, init=False, bindings=True)
    step: reactive[str] = reactive(IDLE, init=False, bindings=True)  # what runs, or waits
    usage: reactive[tuple[int, float]] = reactive((0, 0.0), init=False)  # session tokens, $

    def __init__(
        self,
        task: Task,
        workdir: Path,
        harness: HarnessFactory,
        settings: Settings,
        provider: str = "builtin (offline)",
        budget_cap: str = "no cap",
        agent_provider: Provider | None = None,
        session_id: str | None = None,
        kept: Kept | None = None,
    ) -> None:
        """`kept`: the engineer's kernel the kernel file held before it was given this one
        (kept as a version; f6 goes back to it)."""
        super().__init__()
        self._kept = kept
        self.kernel_task = task
        self._workdir = workdir
        self._kernel_path = workdir / "kernel.py"
        self._harness = harness
        self._settings = settings
        self._provider = provider
        self._budget_cap = budget_cap
        self._agent_provider = agent_provider
        self._resume_id = session_id
        self._session: WorkbenchSession | None = None
        self._editing: Proposal | None = None  # a proposal the engineer is editing
        self._role: Role | None = None  # the role of the agents' current step

    @property
    def target(self) -> str:
        return self._settings.tpu_target

    def compose(self) -> ComposeResult:
        yield Static(id="status", markup=False)
        with Grid(id="panes"):
            yield PlanPane(self._plan_intro(), id="plan-pane", classes="pane")
            yield SourcePane(
                self._kernel_path,
                starter_source(self.kernel_task),
                id="source-pane",
                classes="pane",
            )
            yield TestsPane(id="tests-pane", classes="pane")
            yield ProfilePane(id="profile-pane", classes="pane")
        yield AgentPane(id="agents", classes="pane")
        yield Footer()

    @property
    def plan(self) -> PlanPane:
        return self.query_one(PlanPane)

    @property
    def source(self) -> SourcePane:
        return self.query_one(SourcePane)

    @property
    def tests(self) -> TestsPane:
        return self.query_one(TestsPane)

    @property
    def profile(self) -> ProfilePane:
        return self.query_one(ProfilePane)

    @property
    def agents(self) -> AgentPane:
        return self.query_one(AgentPane)

    @property
    def session(self) -> WorkbenchSession:
        """The session behind the screen (made when the screen mounts)."""
        assert self._session is not None, "the workbench is not mounted"
        return self._session

    def on_mount(self) -> None:
        self._session = WorkbenchSession(
            self._settings,
            self.kernel_task,
            self._workdir,
            self._harness,
            deliver=self.deliver,
            provider=self._agent_provider,
            kept=[] if self._kept is None else [self._kept],
        )
        self._show_status()
        self.source.editor.focus()
        # warm the evaluation workers once the first frame is out: importing the harness holds
        # the event loop for a third of a second, which a callback after the first refresh still
        # put before the frame reached the terminal (benchmarks/first_frame.py)
        self.set_timer(WARM_AFTER_S, self._harness)
        if self._resume_id is not None:
            # the session's own mode: F5 continues it so, and no hand-off is logged for it
            self.mode = self.session.stored_mode(self._resume_id)
            self.deliver(self.session.history(self._resume_id), False)
            ended = self.session.ended()
            then = (
                "F5 continues it"
                if ended is None
                else f"it {ended.words()}; F5 starts a new session from the editor's kernel"
            )
            self._log(f"reopened session {self._resume_id}: {then}")

    # -- what the session did, to the panes -------------------------------------------------------

    def deliver(self, updates: Sequence[AgentUpdate], ended: bool) -> None:
        """A batch of the session's events (in order; `ended`: its loop has ended): one message
        per pane that has something of it."""
        from maxkernel_tui.screens.session_feed import sort_batch

        batch = sort_batch(updates, ended)
        pending = self.session.pending  # a proposal decided before it is drawn is not shown
        agents = [i for i in batch.agents if not isinstance(i, Proposal) or i is pending]
        made = set(batch.versions)
        versions = (
            [(v.number, v.source) for v in self.session.kernel_versions() if v.id in made]
            if made
            else []
        )
        if batch.plan.proposed or batch.plan.decided:
            self.plan.post_message(batch.plan)
        if versions:
            self._show_version(*versions[-1], why="an agent's version")
        if batch.tests:
            self.tests.post_message(TestsMessage(batch.tests))
        if batch.profile:
            self.profile.post_message(ProfileMessage(batch.profile))
        if agents:
            self.agents.post_message(AgentsMessage(agents))
        self.post_message(batch.status)

    def on_status_message(self, message: StatusMessage) -> None:
        if message.step is not None:
            self._role = message.role
            self.step = message.step
        if message.usage is not None:
            self.usage = message.usage
        if message.mode is not None:
            self.mode = message.mode
        if (waiting := self.session.pending) is not None:  # it must not hide that one waits
            self.step = f"{waiting.step}: waiting for you"
        elif message.ended and not self.session.is_running:
            self.step = IDLE
        if message.session_ended:
            self._show_end()

    def _show_end(self, session_id: str | None = None) -> None:
        """The best accepted kernel of the session that ended (or of the search `session_id`) in
        the source, tests and profile; or that there is none."""
        ended = self.session.ended(session_id)
        if ended is None:
            return
        self._log(ended.words())
        if ended.version is None:
            self.tests.post_message(
                TestsMessage(["no accepted kernel: the source shows the last version tried"])
            )
            return
        self._show_version(
            ended.version.number,
            ended.version.source,
            why="the best kernel at the session's end",
            session_id=session_id,
        )
        if ended.report is not None:
            heading = f"── best accepted kernel v{ended.version.number}"
            self.tests.post_message(TestsMessage([heading, *ended.report.checks, ended.report]))
        if ended.profile is not None:
            self.profile.post_message(ProfileMessage([ended.profile]))

    def _show_version(
        self, number: int, source: str, *, why: str, session_id: str | None = None
    ) -> None:
        """A kernel version (of this session, or of the search `session_id`) becomes the source
        and the kernel file; a kernel of the engineer's that the file held and no version has
        is kept as a version first, and the agents' pane says where."""
        kept = self.session.replace_kernel(source, why, session_id)
        self.source.post_message(SourceMessage([(number, source)]))
        if kept is not None:
            self._log(kept.words())

    def _log(self, line: str) -> None:
        """A line in the agents' pane, after what is already on its way there."""
        self.agents.post_message(AgentsMessage([line]))

    def worker_failed(self, group: str, error: BaseException) -> None:
        """A worker of this screen failed (the error is shown): nothing of it runs now."""
        self._log(f"error: {type(error).__name__}: {error}")
        self.step = IDLE

    # -- the agents -------------------------------------------------------------------------------

    def action_agents(self) -> None:
        """Run the agents in the current mode (continue a stopped session)."""
        self._start_agents(self.mode)

    def action_toggle_auto(self) -> None:
        self.mode = Mode.HITL if self.mode == Mode.AUTO else Mode.AUTO
        if self.session.is_running:
            self.session.hand_off(self.mode)
            self.agents.hide_proposal()
        else:
            self._start_agents(self.mode)

    async def action_graph(self) -> None:
        """Hand off to a graph search seeded with the current source as its root; the search
        screen follows it, and promoting a node brings its kernel back here."""
        from maxkernel_tui.agents.search.config import SearchConfig
        from maxkernel_tui.screens.search import SearchScreen

        config = SearchConfig(max_evals=GRAPH_EVALUATIONS)
        seed = self.session.best_accepted() or self.source.save()  # never a rejected kernel
        opened, feed = await self.session.open_search(seed, config)
        screen = SearchScreen(
            self.kernel_task, feed, control=opened.search, portability=self.session.portability
        )
        self._log(f"handed off to a {config.algorithm} graph search (session {opened.session_id})")
        self.app.push_screen(screen)
        # the status line says GRAPH while the search runs, then the mode it was handed from
        handed_from, self.mode = self.mode, Mode.GRAPH
        self.app.run_worker(
            self._run_search(opened, feed, handed_from), group="graph", exit_on_error=False
        )

    async def _run_search(self, opened: OpenSearch, feed: SearchFeed, handed_from: Mode) -> None:
        try:
            await opened.search.run()
        finally:
            feed.finished()
            await opened.aclose()
            self.mode = handed_from
        self._show_end(opened.session_id)

    def _start_agents(self, mode: Mode) -> None:
        if self.session.is_running:
            if (waiting := self.session.pending) is not None and waiting.nothing_new:
                self._decide(Decision(APPROVE))  # go on with the current kernel or plan
                return
            self.notify("the agents are already running (esc stops them)")
            return
        seed, fresh = None, False
        if (ended := self.session.ended()) is not None:
            # an ended session replays to the same end: F5 starts a new one, and says so
            seed, fresh = self._seed(), True
            start = "from the kernel in the editor" if seed else "from scratch (no kernel yet)"
            self._log(
                f"session {self.session.session_id} {ended.words()}. F5 starts a new session "
                f"{start}."
            )
        self.step = "starting"
        self.run_worker(
            self._start(mode, seed, fresh), group="agents", exclusive=True, exit_on_error=False
        )

    def _seed(self) -> str | None:
        """The editor's kernel, for a new session to start from (None: the starter skeleton)."""
        source = self.source.text
        return None if source.strip() == starter_source(self.kernel_task).strip() else source

    async def _start(self, mode: Mode, seed: str | None = None, fresh: bool = False) -> None:
        def progress(stage: str) -> None:
            self.step = f"starting: {stage}"

        await self.session.start(mode, progress=progress, seed=seed, fresh=fresh)
        if self.step.startswith("starting"):
            self.step = "starting: the first step"

    async def action_interrupt(self) -> None:
        if self.agents.asking:
            self.agents.close_input()
            return
        if await self.session.interrupt():
            self.deliver(self.session.drain(), False)  # what happened before the stop first
            self.agents.hide_proposal()
            self._log("stopped by the engineer; F5 continues from the last finished step")
            self.step = "stopped"

    def action_approve(self) -> None:
        self._decide(Decision(APPROVE))

    def action_reject(self) -> None:
        if self.session.pending is not None:
            self.agents.ask("why? (the agent gets this with its next proposal)", "reject")

    def action_edit_proposal(self) -> None:
        proposal = self.session.pending
        if proposal is None:
            return
        self._editing = proposal
        if proposal.subject == Subject.KERNEL:
            if proposal.content.strip():  # an agent with nothing to offer may have no kernel yet
                self.source.load(proposal.content)
            self.source.editor.focus()
        else:
            self.plan.edit(proposal.content)
        self.notify("edit, then ctrl+s submits your version")

    def action_message(self) -> None:
        self.agents.ask(
            "a message for the agents (next step); start with ? to ask the explainer", "message"
        )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.agents.close_input()
        text = event.value.strip()
        if self.agents.purpose == "reject":
            self._decide(Decision(REJECT, feedback=text or None))
        elif self.agents.purpose == "message" and text:
            self._send_message(text)

    def _send_message(self, text: str) -> None:
        waiting = self.session.pending
        if text.startswith("?") and self.session.engine is not None:
            self.run_worker(self._explain(text[1:].strip()), group="explain", exit_on_error=False)
        elif waiting is not None and waiting.nothing_new:  # what to try: the role asked again
            self._decide(Decision(REJECT, feedback=text))
            self._log(f"you: {text} (the {waiting.role} is asked again with it)")
        elif self.session.intervene(Subject.MESSAGE, text):
            self._log(f"you: {text} (delivered at the next step)")
        else:
            self.notify("no session is running: F5 starts one", severity="warning")

    async def _explain(self, question: str) -> None:
        answer = await self.session.explain(question)
        self._log(f"explainer: {answer}")

    def _decide(self, decision: Decision) -> None:
        if self.session.decide(decision):
            self.agents.hide_proposal()
            self._editing = None
            self.step = "working"

    def on_agent_pane_proposal_waiting(self, message: AgentPane.ProposalWaiting) -> None:
        # The proposal takes room from the editor, not from the verdict: the tests and profile
        # row grows to half of the panes while a proposal waits. Its keys must not type into
        # the editor: it is read-only until the proposal is decided or taken for editing.
        self.set_class(message.waiting, "-proposal")
        self.source.held = message.waiting and self._editing is None
        if message.waiting:
            self.judge_ahead()

    def action_previous_version(self) -> None:
        """Back to the kernel the engineer had before another replaced it (kept as a version),
        else to the kernel version before the one shown; the agents start from it."""
        if self.session.kept:
            back = self.session.kept.pop().version
        else:
            earlier = [v for v in self.session.kernel_versions() if v.number < self.source.version]
            if not earlier:
                self.notify("no earlier kernel version")
                return
            back = earlier[-1]
        self._show_version(back.number, back.source, why="f6", session_id=back.session_id)
        if self.session.intervene(Subject.KERNEL, back.source):
            self._log(f"back to v{back.number}: the agents start from it at the next step")

    def action_edit_plan(self) -> None:
        if self.plan.editing:
            self._take_plan_edit()
        else:
            self.plan.edit(self.plan.text)

    def _take_plan_edit(self) -> None:
        text = self.plan.close_editor()
        self.plan.show(text)
        if self.session.intervene(Subject.PLAN, text):
            self._log("your plan goes to the agents at the next step")

    # -- by hand --------------------------------------------------------------------------------

    def action_save(self) -> None:
        if (
            self.plan.editing
            and self._editing is not None
            and self._editing.subject == Subject.PLAN
        ):
            self._decide(Decision(EDIT, content=self.plan.close_editor()))
            return
        if self.plan.editing:
            self._take_plan_edit()
            return
        source = self.source.save()
        if self._editing is not None and self._editing.subject == Subject.KERNEL:
            self._decide(Decision(EDIT, content=source))
            return
        if self.session.intervene(Subject.KERNEL, source):
            self._log("your edit becomes the next kernel version at the next step")
        self.notify(f"saved {self._kernel_path}")

    def action_evaluate(self) -> None:
        """Evaluate the editor's source, saved or not (the kernel file is left as saved), on
        the session's tools: the agents' executor and evaluation options."""
        source = self.source.text
        self.tests.post_message(
            TestsMessage(
                [
                    f"── evaluating {self._kernel_path.name} against {self.kernel_task.task_id} "
                    f"on {self.target} ({self.session.executor})"
                ]
            )
        )
        self.step = "evaluating"
        self.run_worker(
            self._evaluate(source), group="evaluate", exclusive=True, exit_on_error=False
        )

    async def _evaluate(self, source: str) -> None:
        tests = self.tests

        def on_check(check: Check) -> None:  # from the harness's thread
            tests.post_message(TestsMessage([check]))

        report = await self.session.evaluate(source, on_check)
        tests.post_message(TestsMessage([report]))
        self.step = IDLE

    def action_profile(self) -> None:
        self.step = "profiling"
        self.run_worker(
            self._profile(self.source.text), group="profile", exclusive=True, exit_on_error=False
        )

    async def _profile(self, source: str) -> None:
        result = await self.session.profile(source)
        item = result.summary if result.summary is not None else result.error or "no profile"
        self.profile.post_message(ProfileMessage([item]))
        self.step = IDLE

    def _plan_intro(self) -> str:
        task = self.kernel_task
        configs = ", ".join(config_label(task, c) for c in task.agent_visible_configs())
        warnings = "".join(f"\n\n> {warning}" for warning in task.warnings)
        return (
            f"### {task.task_id}\n\n{task.description}\n\n*category* {task.category} · "
            f"*configurations* {configs} · *tolerance* atol "
            f"{task.tolerance(task.configs[0]).atol:g}{warnings}\n\n"
            "No plan yet: F5 runs the agents, or edit the source directly."
        )

    # -- status and bindings ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Decision keys act only while a proposal waits (None: shown dimmed); the agents' keys
        wait while a graph search handed off from here runs."""
        if self.mode == Mode.GRAPH and action in ("agents", "toggle_auto", "graph"):
            return None
        if self._session is None:
            return None if action in (*DECISIONS, "interrupt") else True
        if action in DECISIONS:
            return True if self.session.pending is not None else None
        if action == "interrupt":
            return True if self.session.is_running else None
        return True

    def watch_mode(self) -> None:
        self._show_status()

    def watch_step(self) -> None:
        self._show_status()

    def watch_usage(self) -> None:
        self._show_status()

    def _show_status(self) -> None:
        tokens, cost = self.usage
        self.query_one("#status", Static).update(
            visible(
                f" maxkernel-tui ─ {self.kernel_task.task_id} ─ {self.mode.upper()} ─ "
                f"{self.step} ─ {self.target} (AOT) ─ {self._model_words()} ─ "
                f"{tokens:,} tok ${cost:.2f} / {self._budget_cap}"
            )
        )

    def _model_words(self) -> str:
        """The provider and the model the current step's role asks (`[roles.*]`, else the
        session's); the built-in agent has none to choose."""
        settings = self._settings
        if settings.provider == "builtin":
            return self._provider
        model = settings.role_model(self._role) if self._role else settings.model
        own = self._role is not None and self._role in settings.roles
        return self._provider + (f" {model}" if model else "") + (f" ({self._role})" if own else "")

    async def on_unmount(self) -> None:
        if self._session is not None:
            await self._session.aclose()
