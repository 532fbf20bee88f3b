"""The workbench: plan, editable source, tests, profile and the agents of one task, on one screen.

The engineer edits, evaluates and profiles by hand, or runs the agents (F5): in HITL each
proposal waits here for a key, F2 hands the session to Auto and back, Esc stops the running
step. Evaluation and profiling run the harness from threads, which runs kernels in worker
processes: this process never imports jax. Agent events are drawn in batches by a timer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import (
    ContentSwitcher,
    DataTable,
    Footer,
    Input,
    Log,
    Markdown,
    Static,
    TextArea,
)

from maxkernel_tui.agents.orchestration.gates import (
    APPROVE,
    EDIT,
    REJECT,
    Decision,
    Proposal,
)
from maxkernel_tui.config import Settings
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.report import (
    Check,
    EvalReport,
    format_check,
    format_report,
)
from maxkernel_tui.kernels.perf.profile import ProfileError, profile_kernel
from maxkernel_tui.kernels.perf.summary import ProfileSummary, roofline_bar
from maxkernel_tui.kernels.starter import starter_source
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.screens.agent_pane import AgentPane
from maxkernel_tui.store.db import open_store

if (
    TYPE_CHECKING
):  # the agents' engine and events load when they first run, not with the first frame
    from maxkernel_tui.agents.llm.provider import Provider
    from maxkernel_tui.agents.orchestration.events import SessionEvent
    from maxkernel_tui.screens.agent_link import AgentLink

LOG_LINES = 2000  # the tests log keeps the most recent lines only
DRAW_INTERVAL_S = 0.1  # agent events are drawn at most this often
GRAPH_EVALUATIONS = 12  # a search handed off from the workbench stops after this many evaluations


class CheckFinished(Message):
    def __init__(self, check: Check) -> None:
        super().__init__()
        self.check = check


class EvaluationFinished(Message):
    def __init__(self, report: EvalReport) -> None:
        super().__init__()
        self.report = report


class ProfileFinished(Message):
    def __init__(self, summary: ProfileSummary | None, error: str | None) -> None:
        super().__init__()
        self.summary = summary
        self.error = error


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

    def __init__(
        self,
        task: Task,
        workdir: Path,
        cache: Path,
        harness: Callable[[], Harness],
        target: str = "v5e",
        provider: str = "builtin (offline)",
        budget_cap: str = "no cap",
        settings: Settings | None = None,
        agent_provider: Provider | None = None,
        session_id: str | None = None,
    ) -> None:
        super().__init__()
        self.kernel_task = task
        self._kernel_path = workdir / "kernel.py"
        self._cache = cache
        self._harness = harness
        self._target = target
        self._provider = provider
        self._budget_cap = budget_cap
        self._settings = settings
        self._agent_provider = agent_provider
        self._resume_id = session_id
        self._link: AgentLink | None = None
        self._step = "idle"
        self._mode = "hitl"
        self._usage = (0, 0.0)
        self._version = 0
        self._plan = ""
        self._plans: dict[str, str] = {}  # proposed plans by step, until decided
        self._editing: Proposal | None = None  # a proposal the engineer is editing

    def compose(self) -> ComposeResult:
        yield Static(id="status", markup=False)
        with Grid(id="panes"):
            with (
                Vertical(id="plan-pane", classes="pane"),
                ContentSwitcher(initial="plan", id="plan-switch"),
            ):
                yield Markdown(self._plan_text(), id="plan")
                yield TextArea(language="markdown", id="plan-editor")
            with Vertical(id="source-pane", classes="pane"):
                yield TextArea.code_editor(self._initial_source(), language="python", id="source")
            with Vertical(id="tests-pane", classes="pane"):
                yield Log(id="tests", max_lines=LOG_LINES)
            with Vertical(id="profile-pane", classes="pane"):
                yield DataTable(id="profile", cursor_type="none")
                yield Static("roofline: not profiled yet (ctrl+o)", id="roofline", markup=False)
        yield AgentPane(id="agents", classes="pane")
        yield Footer()

    def on_mount(self) -> None:
        for pane, title in (
            ("#plan-pane", "Plan"),
            ("#source-pane", f"Source  {self._kernel_path.name}"),
            ("#tests-pane", "Tests"),
            ("#profile-pane", "Profile (estimated)"),
            ("#agents", "Agents  (F5 run · F2 HITL⇄Auto · esc stop · ctrl+t message)"),
        ):
            self.query_one(pane).border_title = title
        self.query_one("#profile", DataTable).add_columns(
            "TPU", "VMEM", "HBM", "bound", "est. time", "roofline", "est. speedup"
        )
        self.query_one("#tests", Log).write_line(
            "ctrl+e evaluates the source: static rules, trace, TPU lowering "
            "and compile, numerics in TPU interpret mode, held-out shapes"
        )
        self._show_status()
        self.query_one("#source", TextArea).focus()
        self.call_after_refresh(
            self._harness
        )  # warm the evaluation workers once the screen is drawn
        self.set_interval(DRAW_INTERVAL_S, self._draw_agent_events)
        if self._resume_id is not None:
            self._reopen(self._resume_id)

    # -- the agents -------------------------------------------------------------------------------

    def _agent_link(self) -> AgentLink | None:
        if self._link is None and self._settings is not None:
            from maxkernel_tui.screens.agent_link import AgentLink

            self._link = AgentLink(
                open_store(self._settings.store_path),
                self._settings,
                self.kernel_task,
                self._harness,
                self._on_proposal,
                provider=self._agent_provider,
            )
        return self._link

    def _reopen(self, session_id: str) -> None:
        link = self._agent_link()
        if link is None:
            return
        for event in link.history(session_id):
            self._draw(event)
        self._log_activity(f"reopened session {session_id}: F5 continues it")

    def action_agents(self) -> None:
        """Run the agents in the current mode (continue a stopped session)."""
        self._start_agents(self._mode)

    def action_toggle_auto(self) -> None:
        link = self._agent_link()
        target = "hitl" if self._mode == "auto" else "auto"
        if link is None:
            return
        if link.is_running:
            link.hand_off(target)
            self._set_mode(target)
            self.query_one(AgentPane).hide_proposal()
        else:
            self._set_mode(target)
            self._start_agents(target)

    async def action_graph(self) -> None:
        """Hand off to a graph search seeded with the current source as its root; the search
        screen follows it, and promoting a node brings its kernel back here."""
        if self._settings is None:
            return
        from maxkernel_tui.agents.search.config import SearchConfig
        from maxkernel_tui.agents.search.launch import open_search
        from maxkernel_tui.screens.search import SearchScreen

        link = self._agent_link()
        assert link is not None  # there are settings
        await link.interrupt()
        store = link.store
        config = SearchConfig(max_evals=GRAPH_EVALUATIONS)
        screen: list[SearchScreen] = []
        opened = await open_search(
            store,
            self._settings,
            task=self.kernel_task,
            config=config,
            seed=self._save_source(),
            provider=self._agent_provider,
            listener=lambda event: screen[0].mark_stale() if screen else None,
        )
        screen.append(
            SearchScreen(
                self.kernel_task,
                self._settings.store_path,
                opened.session_id,
                control=opened.search,
                max_evals=config.max_evals,
            )
        )
        self._log_activity(
            f"handed off to a {config.algorithm} graph search (session {opened.session_id})"
        )
        self.app.push_screen(screen[0])
        self.app.run_worker(self._run_search(opened), group="graph")

    @staticmethod
    async def _run_search(opened: Any) -> None:
        try:
            await opened.search.run()
        finally:
            await opened.aclose()

    def _start_agents(self, mode: str) -> None:
        link = self._agent_link()
        if link is None:
            self.notify("no settings: the agents need a store", severity="error")
            return
        if link.is_running:
            self.notify("the agents are already running (esc stops them)")
            return
        self._set_step("starting")
        self.run_worker(link.start(mode), group="agents", exclusive=True)

    async def action_interrupt(self) -> None:
        pane = self.query_one(AgentPane)
        if self.query_one("#agent-input", Input).display:
            pane.close_input()
            return
        if self._link is not None and await self._link.interrupt():
            self._draw_agent_events()  # what happened before the stop is drawn before the stop
            pane.hide_proposal()
            self._log_activity("stopped by the engineer; F5 continues from the last finished step")
            self._set_step("stopped")

    def _on_proposal(self, proposal: Proposal) -> None:
        if proposal.subject == "plan":
            self._plans[proposal.step] = proposal.content
        self.query_one(AgentPane).show_proposal(proposal)
        self._set_step(f"{proposal.step}: waiting for you")

    def _pending(self) -> Proposal | None:
        return self._link.gate.pending if self._link is not None else None

    def action_approve(self) -> None:
        self._decide(Decision(APPROVE))

    def action_reject(self) -> None:
        if self._pending() is not None:
            self.query_one(AgentPane).ask(
                "why? (the agent gets this with its next proposal)", "reject"
            )

    def action_edit_proposal(self) -> None:
        proposal = self._pending()
        if proposal is None:
            return
        self._editing = proposal
        if proposal.subject == "kernel":
            editor = self.query_one("#source", TextArea)
        else:
            editor = self.query_one("#plan-editor", TextArea)
            self.query_one("#plan-switch", ContentSwitcher).current = "plan-editor"
        editor.load_text(proposal.content)
        editor.focus()
        self.notify("edit, then ctrl+s submits your version")

    def action_message(self) -> None:
        self.query_one(AgentPane).ask(
            "a message for the agents (next step); start with ? to ask the explainer", "message"
        )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        pane = self.query_one(AgentPane)
        pane.close_input()
        text = event.value.strip()
        if pane.purpose == "reject":
            self._decide(Decision(REJECT, feedback=text or None))
        elif pane.purpose == "message" and text:
            self._send_message(text)

    def _send_message(self, text: str) -> None:
        link = self._link
        if text.startswith("?") and link is not None and link.engine is not None:
            self.run_worker(self._explain(text[1:].strip()), group="explain")
        elif link is not None and link.intervene("message", text):
            self._log_activity(f"you: {text} (delivered at the next step)")
        else:
            self.notify("no session is running: F5 starts one", severity="warning")

    async def _explain(self, question: str) -> None:
        assert self._link is not None and self._link.engine is not None
        answer = await self._link.engine.explain(question)
        self._log_activity(f"explainer: {answer}")

    def _decide(self, decision: Decision) -> None:
        if self._link is not None and self._link.decide(decision):
            self.query_one(AgentPane).hide_proposal()
            self._editing = None
            self._set_step("working")

    def action_previous_version(self) -> None:
        """Back to the kernel version before the one shown; the agents start from it."""
        link = self._agent_link()
        if link is None or link.session_id is None:
            return
        earlier = [
            v for v in link.store.kernel_versions(link.session_id) if v.number < self._version
        ]
        if not earlier:
            self.notify("no earlier kernel version")
            return
        self._show_version(earlier[-1].number, earlier[-1].source)
        if link.intervene("kernel", earlier[-1].source):
            self._log_activity(
                f"back to v{earlier[-1].number}: the agents start from it at the next step"
            )

    def action_edit_plan(self) -> None:
        switch = self.query_one("#plan-switch", ContentSwitcher)
        if switch.current == "plan":
            self.query_one("#plan-editor", TextArea).load_text(self._plan)
            switch.current = "plan-editor"
            self.query_one("#plan-editor", TextArea).focus()
        else:
            self._take_plan_edit()

    def _take_plan_edit(self) -> None:
        text = self.query_one("#plan-editor", TextArea).text
        self.query_one("#plan-switch", ContentSwitcher).current = "plan"
        self._show_plan(text)
        if self._link is not None and self._link.intervene("plan", text):
            self._log_activity("your plan goes to the agents at the next step")

    # -- drawing agent events (batched) ------------------------------------------------------------

    def _draw_agent_events(self) -> None:
        if self._link is None:
            return
        events = self._link.take_events()
        if events:
            with self.app.batch_update():
                for event in events:
                    self._draw(event)
            if (waiting := self._pending()) is not None:  # drawn steps must not hide that one waits
                self._set_step(f"{waiting.step}: waiting for you")
        running = self._link.running
        if (
            running is not None
            and running.done()
            and not running.cancelled()
            and self._step != "idle"
        ):
            self._set_step("idle")

    def _draw(self, event: SessionEvent) -> None:
        from maxkernel_tui.agents.orchestration import events as ev
        from maxkernel_tui.agents.orchestration.describe import describe

        if isinstance(event, ev.TextChunk):
            self.query_one("#activity", Log).write(event.text)
            return
        line = describe(event)
        if line is not None:
            self._log_activity(line)
        match event:
            case ev.StepStarted():
                self._set_step(event.step)
            case ev.ProposalMade() if event.subject == "plan":
                self._plans[event.step] = event.content
            case ev.DecisionMade() if event.step in self._plans and event.action != REJECT:
                self._show_plan(
                    event.content
                    if event.action == EDIT and event.content
                    else self._plans[event.step]
                )
            case ev.VersionCreated():
                if self._link is not None:
                    self._show_version(
                        event.number, self._link.store.kernel_version(event.version_id).source
                    )
            case ev.Note() if event.role == "tester":
                self.query_one("#tests", Log).write_line(event.text)
            case ev.EvaluationDone():
                verdict = event.verdict.upper() + (f": {event.failure}" if event.failure else "")
                self.query_one("#tests", Log).write_line(f"verdict: {verdict}")
            case ev.ProfileDone() if event.version_id is not None and event.error is None:
                self._show_profile(ProfileSummary.from_json(event.summary))
            case ev.UsageReport():
                self._usage = (event.session_tokens, event.session_cost_usd)
                self._show_status()
            case ev.ModeChanged():
                self._set_mode(event.mode)
            case ev.SessionEnded():
                self._set_step("idle")

    def _log_activity(self, line: str) -> None:
        log = self.query_one("#activity", Log)
        log.write(("" if log.lines and not log.lines[-1] else "\n") + line + "\n")

    def _show_version(self, number: int, source: str) -> None:
        self._version = number
        self.query_one("#source", TextArea).load_text(source)
        self.query_one("#source-pane").border_title = f"Source  {self._kernel_path.name}  v{number}"
        self._write_kernel(source)

    def _show_plan(self, text: str) -> None:
        self._plan = text
        self.query_one("#plan", Markdown).update(text)

    # -- by hand --------------------------------------------------------------------------------

    def action_save(self) -> None:
        if self.query_one("#plan-switch", ContentSwitcher).current == "plan-editor":
            proposal = self._editing
            if proposal is not None and proposal.subject == "plan":
                self.query_one("#plan-switch", ContentSwitcher).current = "plan"
                self._decide(Decision(EDIT, content=self.query_one("#plan-editor", TextArea).text))
            else:
                self._take_plan_edit()
            return
        source = self._save_source()
        if self._editing is not None and self._editing.subject == "kernel":
            self._decide(Decision(EDIT, content=source))
            return
        if self._link is not None and self._link.intervene("kernel", source):
            self._log_activity("your edit becomes the next kernel version at the next step")
        self.notify(f"saved {self._kernel_path}")

    def action_evaluate(self) -> None:
        self._save_source()
        log = self.query_one("#tests", Log)
        log.write_line(
            f"── evaluating {self._kernel_path.name} against {self.kernel_task.task_id} on {self._target}"
        )
        self._set_step("evaluating")
        self._evaluate()

    def action_profile(self) -> None:
        self._save_source()
        self._set_step("profiling")
        self._profile()

    @work(thread=True, exclusive=True, group="evaluate")
    def _evaluate(self) -> None:
        report = self._harness().evaluate(
            self._kernel_path,
            self.kernel_task,
            EvalOptions(target=self._target),
            on_check=lambda check: self.post_message(CheckFinished(check)),
        )
        self.post_message(EvaluationFinished(report))

    @work(thread=True, exclusive=True, group="profile")
    def _profile(self) -> None:
        try:
            summary = profile_kernel(
                self._kernel_path,
                self.kernel_task,
                trace_root=self._cache / "traces",
                calibration_file=self._cache / "calibration.json",
            )
        except ProfileError as error:
            self.post_message(ProfileFinished(None, str(error)))
            return
        self.post_message(ProfileFinished(summary, None))

    def on_check_finished(self, message: CheckFinished) -> None:
        self.query_one("#tests", Log).write_line(format_check(message.check))

    def on_evaluation_finished(self, message: EvaluationFinished) -> None:
        self.query_one("#tests", Log).write_line(format_report(message.report).splitlines()[-1])
        self._set_step("idle")

    def on_profile_finished(self, message: ProfileFinished) -> None:
        self._set_step("idle")
        if message.summary is None:
            self.query_one("#roofline", Static).update(f"profile failed: {message.error}")
            return
        self._show_profile(message.summary)

    def _show_profile(self, summary: ProfileSummary) -> None:
        table = self.query_one("#profile", DataTable)
        table.clear()
        for row in summary.table_rows():
            table.add_row(*row)
        first = summary.estimates[0] if summary.estimates else None
        bar = roofline_bar(first.roofline_share if first else None)
        warnings = [w for ws in summary.warnings.values() for w in ws]
        timing = (
            "timing: not measured (no TPU)"
            if not summary.trace or not summary.trace.measured
            else f"trace: {summary.trace.kind}"
        )
        self.query_one("#roofline", Static).update(
            f"{first.target if first else ''} {bar}\n{timing}"
            + "".join(f"\n⚠ {w}" for w in dict.fromkeys(warnings))
        )

    def _initial_source(self) -> str:
        if self._kernel_path.is_file():
            return self._kernel_path.read_text(encoding="utf-8")
        return starter_source(self.kernel_task)

    def _save_source(self) -> str:
        source = self.query_one("#source", TextArea).text
        self._write_kernel(source)
        return source

    def _write_kernel(self, source: str) -> None:
        self._kernel_path.parent.mkdir(parents=True, exist_ok=True)
        self._kernel_path.write_text(source, encoding="utf-8")

    def _plan_text(self) -> str:
        task = self.kernel_task
        configs = ", ".join(task.agent_visible_configs())
        return (
            f"### {task.task_id}\n\n{task.description}\n\n*category* {task.category} · *configurations* "
            f"{configs} · *tolerance* atol {task.tolerance(task.configs[0]).atol:g}\n\n"
            "No plan yet: F5 runs the agents, or edit the source directly."
        )

    # -- status and bindings ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Decision keys act only while a proposal waits (None: shown dimmed)."""
        if action in ("approve", "reject", "edit_proposal"):
            return True if self._pending() is not None else None
        if action == "interrupt":
            return True if (self._link is not None and self._link.is_running) else None
        return True

    def _set_mode(self, mode: str) -> None:
        self._mode = mode
        self._show_status()
        self.refresh_bindings()

    def _set_step(self, step: str) -> None:
        self._step = step
        self._show_status()
        self.refresh_bindings()

    def _show_status(self) -> None:
        tokens, cost = self._usage
        self.query_one("#status", Static).update(
            f" maxkernel-tui ─ {self.kernel_task.task_id} ─ {self._mode.upper()} ─ {self._step} ─ {self._target} "
            f"(AOT) ─ {self._provider} ─ {tokens:,} tok ${cost:.2f} / {self._budget_cap}"
        )

    async def on_unmount(self) -> None:
        if self._link is not None:
            await self._link.aclose()
