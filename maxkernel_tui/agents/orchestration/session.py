"""Open a session's engine, new or resumed: the store row, the journal, the provider behind the
client and its budget, the tools, the session's directory, and the task's facts for prompts.
This is the engine's composition root: the one place the real client and tools are built.
No jax here (the tools run it in worker processes)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from maxkernel_tui.agents.background import in_daemon_thread
from maxkernel_tui.agents.budget import Budget, session_budget
from maxkernel_tui.agents.llm.client import LLMClient
from maxkernel_tui.agents.llm.provider import DraftsAhead, Provider
from maxkernel_tui.agents.orchestration import keys
from maxkernel_tui.agents.orchestration.ending import error_words
from maxkernel_tui.agents.orchestration.engine import LoopLimits, SessionEngine
from maxkernel_tui.agents.orchestration.events import ErrorRaised, SessionEnded, SessionStarted
from maxkernel_tui.agents.orchestration.gates import Gate
from maxkernel_tui.agents.orchestration.journal import Journal, Listener
from maxkernel_tui.agents.orchestration.tools import KernelTools, build_tools
from maxkernel_tui.agents.orchestration.workspace import Workspace
from maxkernel_tui.agents.providers import PROVIDERS, build_provider
from maxkernel_tui.agents.roles.prompts import Role
from maxkernel_tui.agents.tools.assignment import RolePlan, role_plan
from maxkernel_tui.agents.tools.runner import Toolbox
from maxkernel_tui.config import Settings, cache_dir
from maxkernel_tui.kernels.catalog import describe_tasks
from maxkernel_tui.kernels.evaluation.timing.measured_choice import device_timer
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.service.service import HarnessFactory
from maxkernel_tui.kernels.service.setup import EvaluationSetup
from maxkernel_tui.kernels.task import Task
from maxkernel_tui.store.db import Store
from maxkernel_tui.store.kinds import Mode, SessionStatus


@dataclass
class OpenSession:
    engine: SessionEngine
    session_id: str
    resumed: bool
    provider: Provider
    tools: KernelTools
    toolbox: Toolbox | None = None  # the sub-agents' tools
    ahead: asyncio.Task[None] | None = None  # the provider's work before the first step

    async def aclose(self) -> None:
        await self.provider.aclose()
        if self.ahead is not None:  # the provider's close has ended that work's worker
            self.ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.ahead
        self.tools.close()
        if self.toolbox is not None:
            self.toolbox.close()


def provider_settings(settings: Settings) -> dict[str, Any]:
    """The registry's mapping for the configured provider (names of variables, never keys), with
    only the settings its kind takes: the built-in agent has no model to choose, so a model set
    for other providers (in the config file, or stored by a session it resumes) is not its."""
    kind = PROVIDERS.get(settings.provider)
    chosen = {"model": settings.model, "base_url": settings.base_url}
    taken = {
        name: value
        for name, value in chosen.items()
        if value and (kind is None or name in kind.keys)
    }
    return {"name": settings.provider, **taken}


def task_facts(task: Task, target: str) -> str:
    """What every prompt says about the task: description, shapes per configuration, the XLA
    reference's cost on the target (cached by the catalog), tolerances, the reference source."""
    described = describe_tasks([task], cache_dir(), target=target, workers=1)[task.task_id]
    lines = [f"id: {task.task_id}", f"what: {task.description.strip()}"]
    visible = task.agent_visible_configs()
    for name, shapes in described.configs.items():
        if name not in visible:  # held-out shapes never reach a prompt
            continue
        tolerance = task.tolerances.get(name)
        limits = f"; atol {tolerance.atol:g}, rtol {tolerance.rtol:g}" if tolerance else ""
        data = shapes.to_json()
        lines.append(
            f"configuration {name}: inputs {json.dumps(data['inputs'])}, static {shapes.static}, "
            f"outputs {json.dumps(data['outputs'])}{limits}"
        )
    cost = described.cost
    if cost is not None and cost.flops is not None:
        lines.append(
            f"XLA reference on TPU {cost.target} (estimated by XLA's cost analysis): "
            f"{cost.flops:.3g} flops, {cost.bytes_accessed:.3g} bytes accessed, "
            f"optimal {(cost.optimal_seconds or 0.0) * 1e3:.3f} ms"
        )
    lines.append(
        "The first configuration is the production (bench) shape; the kernel must also be correct "
        "on the others, and on held-out shapes it has not seen."
    )
    reference = task.reference_path.read_text(encoding="utf-8")
    lines.append(f"The kernel defines `{task.entry_points[0]}` with the reference's signature.")
    if task.gradients:
        lines.append(
            f"gradients judged: {', '.join(task.gradients)} (jax.vjp against the reference's, "
            "random cotangents; the backward must be Pallas too)"
        )
    lines.append(f"{task.reference_file}:\n```python\n{reference}```")
    return "\n".join(lines)


@dataclass(frozen=True)
class _Opening:
    """What a session runs on: new, or as it was started (a resume)."""

    journal: Journal
    task: Task
    mode: Mode
    target: str
    settings: Settings
    limits: LoopLimits
    roles: RolePlan


def _resumed(store: Store, settings: Settings, resume: str) -> _Opening:
    """The stored session `resume` names, with its task, mode, target, limits and (unless a flag
    chose another) its own model."""
    session = store.find_session(resume)
    journal = Journal(store, session.id)
    started = journal.recall(keys.START, SessionStarted)
    if started is None:
        raise ValueError(
            f"session {session.id} was not started by `run` or the workbench; nothing to resume"
        )
    if settings.source("provider").kind != "flag":  # the session goes on with its own model
        settings = replace(settings, provider=started.provider, model=started.model)
    task = load_task(Path(started.task_dir), cache=cache_dir())
    if started.gradients:  # an option's gradients, which the folder does not say
        task = task.with_gradients(tuple(started.gradients))
    limits = LoopLimits.from_json(started.limits)
    roles = RolePlan.from_json(started.roles)  # the roles' models and tools as it started
    return _Opening(journal, task, session.mode, started.target, settings, limits, roles)


def _created(
    store: Store, settings: Settings, task: Task, mode: Mode, limits: LoopLimits
) -> _Opening:
    session = store.create_session(task.task_id, mode, title=f"{task.task_id} ({mode})")
    journal = Journal(store, session.id)
    roles = role_plan(settings)
    # the stored session's mode: typed even when a caller passed its name (`run --mode auto`)
    return _Opening(journal, task, session.mode, settings.tpu_target, settings, limits, roles)


async def open_session(
    store: Store,
    settings: Settings,
    *,
    task: Task | None = None,
    mode: Mode = Mode.AUTO,
    gates: Callable[[Mode], Gate],
    limits: LoopLimits | None = None,
    resume: str | None = None,
    env: dict[str, str] | None = None,
    provider: Provider | None = None,
    listener: Listener | None = None,
    harness: HarnessFactory | None = None,
    setup: EvaluationSetup | None = None,
    progress: Callable[[str], None] | None = None,
) -> OpenSession:
    """A new session on `task`, or `resume` (an id or its prefix) with its stored task and mode.
    `listener` gets every new event from the first (the session's start) on. `setup`: where and
    how evaluations run (default: the settings' `EvaluationSetup`; a resumed session keeps its
    stored target); a cluster that cannot be used is a ClusterError (ValueError) before
    anything is stored or paid for. `progress` hears each stage of the opening, in words (a
    cold cache makes the task's description take a while)."""
    say = progress or (lambda stage: None)
    setup = setup or EvaluationSetup.of(settings)
    if setup.executor.ray is not None:
        say(f"connecting to {setup.executor_words}")
    await asyncio.to_thread(setup.executor.prepare)
    if resume is not None:
        opening = _resumed(store, settings, resume)
    else:
        assert task is not None
        opening = _created(store, settings, task, mode, limits or LoopLimits())
    try:
        return await _opened(
            store, opening, gates, resume is not None, env, provider, listener, harness, setup, say
        )
    except BaseException as error:
        if resume is None:  # a new session that never ran: ended now, never left active
            end_unopened(opening.journal, error)
        raise


def end_unopened(journal: Journal, error: BaseException) -> None:
    """A new session whose opening (or a search's, after it) failed or was stopped: stopped
    (resumable) when the engineer stopped it, else failed, with the reason logged as its end."""
    if isinstance(error, (asyncio.CancelledError, KeyboardInterrupt, EOFError)):
        journal.store.update_session(journal.session_id, status=SessionStatus.STOPPED)
        return
    reason = f"could not start: {error_words(error)}"
    journal.emit(ErrorRaised(keys.sub(keys.START, "error"), keys.START, Role.ENGINE, reason))
    journal.emit(SessionEnded(keys.end(0), reason, None, None, ""))
    journal.store.update_session(journal.session_id, status=SessionStatus.FAILED)


async def _opened(
    store: Store,
    opening: _Opening,
    gates: Callable[[Mode], Gate],
    resumed: bool,
    env: dict[str, str] | None,
    provider: Provider | None,
    listener: Listener | None,
    harness: HarnessFactory | None,
    setup: EvaluationSetup,
    say: Callable[[str], None],
) -> OpenSession:
    """The engine of `opening`, with its provider, tools and the task's facts."""
    journal, task, settings = opening.journal, opening.task, opening.settings
    provider = provider or build_provider(provider_settings(settings), env)
    budget = session_budget(settings)
    _charge_earlier_usage(budget, store, journal.session_id)
    if listener is not None:
        journal.subscribe(listener)
    journal.emit(
        SessionStarted(
            keys.START,
            str(task.folder),
            task.task_id,
            opening.mode,
            opening.target,
            provider.name,
            provider.model,
            opening.limits.to_json(),
            opening.roles.to_json(),
            list(task.gradients),
        )
    )
    # the provider's own preparation (the built-in agent's drafts) overlaps the description
    ahead = (
        asyncio.create_task(provider.draft_ahead(str(task.folder), opening.target))
        if isinstance(provider, DraftsAhead)
        else None
    )
    try:
        say(f"describing {task.task_id} (shapes and the reference's XLA cost on {opening.target})")
        # a daemon thread: ctrl+q meanwhile does not wait for the description to end
        facts = await in_daemon_thread(task_facts, task, opening.target)
        say("starting the evaluation workers")
        workspace = Workspace(settings.data_dir / "sessions" / journal.session_id)
        tools = await asyncio.to_thread(
            build_tools, setup.on_target(opening.target), task, workspace.path("traces"), harness
        )
    except BaseException:  # failed or cancelled: no drafting goes on for a session not opened
        if ahead is not None:
            ahead.cancel()
        raise
    prober = tools if tools.service.probes else None  # Ray nodes run no probes
    toolbox = Toolbox(task, opening.target, workspace.path("tools"), prober=prober, profiler=tools)
    engine = SessionEngine(
        journal=journal,
        client=LLMClient(provider, budget=budget),
        tools=tools,
        workspace=workspace,
        gates=gates,
        mode=opening.mode,
        task_facts=facts,
        limits=opening.limits,
        model=settings.model,
        timer=device_timer(task),
        roles=opening.roles,
        toolbox=toolbox,
    )
    return OpenSession(engine, journal.session_id, resumed, provider, tools, toolbox, ahead)


def _charge_earlier_usage(budget: Budget, store: Store, session_id: str) -> None:
    """A resumed session's budget starts from what it has already spent (already over: the
    first call will say so)."""
    calls = store.llm_calls(session_id)
    if calls:
        budget.charge(
            sum(c.prompt_tokens for c in calls),
            sum(c.completion_tokens for c in calls),
            sum(c.cost for c in calls),
            calls=len(calls),
        )
