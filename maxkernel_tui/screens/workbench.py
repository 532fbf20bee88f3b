"""The workbench: plan, editable source, tests, profile and the agents of one task, on one screen.

The engineer edits, evaluates and profiles by hand, or runs the agents (F5): in HITL each
proposal waits here for a key, F2 hands the session to Auto and back, Esc stops the running
step. Each pane is a widget of its own (plan_pane, source_pane, tests_pane, profile_pane,
agent_pane) with its children and state; this screen routes keys and messages to them. The
tests and profile panes run the harness from threads, which runs kernels in worker processes:
this process never imports jax. What the agents do arrives as `AgentEvents` messages from the
agent link (agent_link.py), in batches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from maxkernel_tui.agents.orchestration.gates import APPROVE, EDIT, REJECT, Decision, Proposal
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.listing import config_label
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.starter import starter_source
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.screens.agent_pane import AgentPane
from maxkernel_tui.screens.plan_pane import PlanPane
from maxkernel_tui.screens.profile_pane import ProfileFinished, ProfilePane
from maxkernel_tui.screens.source_pane import SourcePane
from maxkernel_tui.screens.tests_pane import EvaluationFinished, TestsPane
from maxkernel_tui.store.db import open_store
from maxkernel_tui.store.rows import AUTO, HITL

if (
    TYPE_CHECKING
):  # the agents' engine and events load when they first run, not with the first frame
    from maxkernel_tui.agents.llm.provider import Provider
    from maxkernel_tui.agents.orchestration.events import SessionEvent
    from maxkernel_tui.agents.search.launch import OpenSearch
    from maxkernel_tui.screens.agent_link import AgentEvents, AgentLink, AgentUpdate

GRAPH_EVALUATIONS = 12  # a search handed off from the workbench stops after this many evaluations
IDLE = "idle"


class WorkbenchScreen(Screen[None]):
    CSS_PATH = "workbench.tcss"
    # priority: the code editor would otherwise take these keys (ctrl+e is its end-of-line)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f5", "agents", "Agents", priority=True),
        Binding("a", "approve", "Approve", show=False),
        Binding("e", "edit_proposal", "Edit", show=False),
        Binding("r", "reject", "Reject", show=False),
        Binding("f2", "toggle_auto", "HITL⇄Auto", priority=True),
        Binding("f3", "graph", "Graph", priority=True),
        Binding("escape", "interrupt", "Stop", priority=True),
        Binding("ctrl+e", "evaluate", "Evaluate", priority=True),
        Binding("ctrl+o", "profile", "Profile", priority=True),
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("f4", "edit_plan", "Edit plan", priority=True),
        Binding("f6", "previous_version", "Undo version", priority=True),
        Binding("ctrl+t", "message", "Message", priority=True),
        Binding("ctrl+q", "app.quit", "Quit", priority=True),
    ]
    mode: reactive[str] = reactive(HITL, init=False, bindings=True)
    step: reactive[str] = reactive(IDLE, init=False, bindings=True)  # what runs, or waits
    usage: reactive[tuple[int, float]] = reactive((0, 0.0), init=False)  # session tokens, $

    def __init__(
        self,
        task: Task,
        workdir: Path,
        cache: Path,
        harness: Callable[[], Harness],
        settings: Settings,
        provider: str = "builtin (offline)",
        budget_cap: str = "no cap",
        agent_provider: Provider | None = None,
        session_id: str | None = None,
    ) -> None:
        super().__init__()
        self.kernel_task = task
        self._kernel_path = workdir / "kernel.py"
        self._cache = cache
        self._harness = harness
        self._settings = settings
        self._provider = provider
        self._budget_cap = budget_cap
        self._agent_provider = agent_provider
        self._resume_id = session_id
        self._link: AgentLink | None = None
        self._editing: Proposal | None = None  # a proposal the engineer is editing
        self._role: str | None = None  # the role of the agents' current step

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
    def link(self) -> AgentLink | None:
        """The link to the agents' session; None until the agents first run or a session opens."""
        return self._link

    def on_mount(self) -> None:
        self._show_status()
        self.source.editor.focus()
        self.call_after_refresh(self._harness)  # warm the evaluation workers once drawn
        if self._resume_id is not None:
            self._reopen(self._resume_id)

    # -- the agents -------------------------------------------------------------------------------

    def agent_link(self) -> AgentLink:
        """The link to the agents, made on first use (the engine loads then)."""
        if self._link is None:
            from maxkernel_tui.screens.agent_link import AgentLink

            self._link = AgentLink(
                open_store(self._settings.store_path),
                self._settings,
                self.kernel_task,
                self._harness,
                self,
                provider=self._agent_provider,
            )
        return self._link

    def _reopen(self, session_id: str) -> None:
        link = self.agent_link()
        # the session's own mode: F5 continues it so, and no hand-off is logged for it
        self.mode = link.stored_mode(session_id)
        for event in link.history(session_id):
            self._draw(event)
        self.agents.log_line(f"reopened session {session_id}: F5 continues it")

    def action_agents(self) -> None:
        """Run the agents in the current mode (continue a stopped session)."""
        self._start_agents(self.mode)

    def action_toggle_auto(self) -> None:
        link = self.agent_link()
        self.mode = HITL if self.mode == AUTO else AUTO
        if link.is_running:
            link.hand_off(self.mode)
            self.agents.hide_proposal()
        else:
            self._start_agents(self.mode)

    async def action_graph(self) -> None:
        """Hand off to a graph search seeded with the current source as its root; the search
        screen follows it, and promoting a node brings its kernel back here."""
        from maxkernel_tui.agents.search.config import SearchConfig
        from maxkernel_tui.screens.search import SearchScreen

        config = SearchConfig(max_evals=GRAPH_EVALUATIONS)
        screens: list[SearchScreen] = []  # the screen needs the session the search opens
        link = self.agent_link()
        seed = link.best_accepted() or self.source.save()  # never a rejected kernel
        opened = await link.open_search(
            seed,
            config,
            listener=lambda event: screens[0].mark_stale() if screens else None,
        )
        screen = SearchScreen(
            self.kernel_task,
            self._settings.store_path,
            opened.session_id,
            control=opened.search,
            max_evals=config.max_evals,
        )
        screens.append(screen)
        self.agents.log_line(
            f"handed off to a {config.algorithm} graph search (session {opened.session_id})"
        )
        self.app.push_screen(screen)
        self.app.run_worker(self._run_search(opened), group="graph")

    async def _run_search(self, opened: OpenSearch) -> None:
        try:
            await opened.search.run()
        finally:
            await opened.aclose()
        self._show_end(opened.session_id)

    def _start_agents(self, mode: str) -> None:
        link = self.agent_link()
        if link.is_running:
            self.notify("the agents are already running (esc stops them)")
            return
        self.step = "starting"
        self.run_worker(link.start(mode), group="agents", exclusive=True)

    async def action_interrupt(self) -> None:
        if self.agents.asking:
            self.agents.close_input()
            return
        if self._link is not None and await self._link.interrupt():
            self._draw_all(self._link.drain())  # what happened before the stop is drawn first
            self.agents.hide_proposal()
            self.agents.log_line(
                "stopped by the engineer; F5 continues from the last finished step"
            )
            self.step = "stopped"

    def _pending(self) -> Proposal | None:
        return self._link.pending if self._link is not None else None

    def action_approve(self) -> None:
        self._decide(Decision(APPROVE))

    def action_reject(self) -> None:
        if self._pending() is not None:
            self.agents.ask("why? (the agent gets this with its next proposal)", "reject")

    def action_edit_proposal(self) -> None:
        proposal = self._pending()
        if proposal is None:
            return
        self._editing = proposal
        if proposal.subject == "kernel":
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
        link = self._link
        if text.startswith("?") and link is not None and link.engine is not None:
            self.run_worker(self._explain(link, text[1:].strip()), group="explain")
        elif link is not None and link.intervene("message", text):
            self.agents.log_line(f"you: {text} (delivered at the next step)")
        else:
            self.notify("no session is running: F5 starts one", severity="warning")

    async def _explain(self, link: AgentLink, question: str) -> None:
        answer = await link.explain(question)
        self.agents.log_line(f"explainer: {answer}")

    def _decide(self, decision: Decision) -> None:
        if self._link is not None and self._link.decide(decision):
            self.agents.hide_proposal()
            self._editing = None
            self.step = "working"

    def action_previous_version(self) -> None:
        """Back to the kernel version before the one shown; the agents start from it."""
        link = self.agent_link()
        earlier = [v for v in link.kernel_versions() if v.number < self.source.version]
        if not earlier:
            self.notify("no earlier kernel version")
            return
        self.source.show_version(earlier[-1].number, earlier[-1].source)
        if link.intervene("kernel", earlier[-1].source):
            self.agents.log_line(
                f"back to v{earlier[-1].number}: the agents start from it at the next step"
            )

    def action_edit_plan(self) -> None:
        if self.plan.editing:
            self._take_plan_edit()
        else:
            self.plan.edit(self.plan.text)

    def _take_plan_edit(self) -> None:
        text = self.plan.close_editor()
        self.plan.show(text)
        if self._link is not None and self._link.intervene("plan", text):
            self.agents.log_line("your plan goes to the agents at the next step")

    # -- drawing what the agents did ---------------------------------------------------------------

    def on_agent_events(self, message: AgentEvents) -> None:
        self._draw_all(message.updates)
        if (waiting := self._pending()) is not None:  # drawn steps must not hide that one waits
            self.step = f"{waiting.step}: waiting for you"
        elif message.finished and self.step != IDLE:
            self.step = IDLE

    def _draw_all(self, updates: list[AgentUpdate]) -> None:
        with self.app.batch_update():
            for update in updates:
                if isinstance(update, Proposal):
                    self._show_proposal(update)
                else:
                    self._draw(update)

    def on_agent_pane_proposal_waiting(self, message: AgentPane.ProposalWaiting) -> None:
        # The proposal takes room from the editor, not from the verdict: the tests and profile
        # row grows to half of the panes while a proposal waits.
        self.set_class(message.waiting, "-proposal")

    def _show_proposal(self, proposal: Proposal) -> None:
        if proposal.subject == "plan":
            self.plan.propose(proposal.step, proposal.content)
        if self._pending() is proposal:  # not when it was decided before it was drawn
            self.agents.show_proposal(proposal)

    def _draw(self, event: SessionEvent) -> None:
        from maxkernel_tui.agents.orchestration import events as ev
        from maxkernel_tui.agents.orchestration.describe import describe

        if isinstance(event, ev.TextChunk):
            self.agents.stream(event.text)
            return
        if (line := describe(event)) is not None:
            self.agents.log_line(line)
        match event:
            case ev.StepStarted():
                self._role = event.role
                self.step = event.step
            case ev.ProposalMade() if event.subject == "plan":
                self.plan.propose(event.step, event.content)
            case ev.DecisionMade():
                self.plan.decided(event.step, event.action, event.content)
            case ev.VersionCreated() if self._link is not None:
                self.source.show_version(event.number, self._link.kernel_source(event.version_id))
            case ev.Note() if event.role == "tester":
                self.tests.write(event.text)
            case ev.EvaluationDone():
                self.tests.show_verdict(event.eval_report())
            case ev.EarlierVerdict() if self._link is not None:
                self.source.show_version(
                    event.version_number, self._link.kernel_source(event.version_id)
                )
                self.tests.write(f"v{event.version_number} again: its earlier verdict stands")
                self.tests.show_verdict(event.eval_report())
            case ev.ProfileDone() if event.version_id is not None and event.error is None:
                self.profile.show(ProfileSummary.from_json(event.summary))
            case ev.UsageReport():
                self.usage = (event.session_tokens, event.session_cost_usd)
            case ev.ModeChanged():
                self.mode = event.mode
            case ev.SessionEnded():
                self.step = IDLE
                self._show_end()

    def _show_end(self, session_id: str | None = None) -> None:
        """The best accepted kernel of the session that ended (or of the search `session_id`) in
        the source, tests and profile; or that there is none."""
        ended = self._link.ended(session_id) if self._link is not None else None
        if ended is None:
            return
        self.agents.log_line(ended.words())
        if ended.version is None:
            self.tests.write("no accepted kernel: the source shows the last version tried")
            return
        self.source.show_version(ended.version.number, ended.version.source)
        if ended.report is not None:
            self.tests.write(f"── best accepted kernel v{ended.version.number}")
            for check in ended.report.checks:
                self.tests.show_check(check)
            self.tests.show_report(ended.report)
        if ended.profile is not None:
            self.profile.show(ended.profile)

    # -- by hand --------------------------------------------------------------------------------

    def action_save(self) -> None:
        if self.plan.editing and self._editing is not None and self._editing.subject == "plan":
            self._decide(Decision(EDIT, content=self.plan.close_editor()))
            return
        if self.plan.editing:
            self._take_plan_edit()
            return
        source = self.source.save()
        if self._editing is not None and self._editing.subject == "kernel":
            self._decide(Decision(EDIT, content=source))
            return
        if self._link is not None and self._link.intervene("kernel", source):
            self.agents.log_line("your edit becomes the next kernel version at the next step")
        self.notify(f"saved {self._kernel_path}")

    def action_evaluate(self) -> None:
        self.source.save()
        self.tests.begin(self._kernel_path.name, self.kernel_task.task_id, self.target)
        self.step = "evaluating"
        self.tests.evaluate(self._harness, self._kernel_path, self.kernel_task, self.target)

    def action_profile(self) -> None:
        self.source.save()
        self.step = "profiling"
        self.profile.profile(self._kernel_path, self.kernel_task, self._cache)

    def on_evaluation_finished(self, message: EvaluationFinished) -> None:
        self.step = IDLE

    def on_profile_finished(self, message: ProfileFinished) -> None:
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
        """Decision keys act only while a proposal waits (None: shown dimmed)."""
        if action in ("approve", "reject", "edit_proposal"):
            return True if self._pending() is not None else None
        if action == "interrupt":
            return True if (self._link is not None and self._link.is_running) else None
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
            f" maxkernel-tui ─ {self.kernel_task.task_id} ─ {self.mode.upper()} ─ {self.step} ─ "
            f"{self.target} (AOT) ─ {self._model_words()} ─ {tokens:,} tok ${cost:.2f} / "
            f"{self._budget_cap}"
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
        if self._link is not None:
            await self._link.aclose()
