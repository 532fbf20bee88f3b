"""The `Tools` of a session on a Ray cluster: each evaluation and profile goes, as the kernel's
source and the task folder's files (nothing from this process's environment), to a node's
long-lived service, and comes back as the same typed report the local harness gives, with the
node that produced it. The store, the graph, the budget and every model call stay here. One
dispatcher per process, shared by the sessions of a suite. Imports Ray; no jax."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

from maxkernel_tui.agents.executors.choice import EvaluationSetup, ExecutorChoice
from maxkernel_tui.agents.orchestration.tools import (
    CheckListener,
    ProfileResult,
    with_edge_configs,
)
from maxkernel_tui.kernels.edge_configs import EdgeConfig, validate_edge_configs
from maxkernel_tui.kernels.evaluation.harness import EvalOptions
from maxkernel_tui.kernels.executors import ray_cluster
from maxkernel_tui.kernels.executors.errors import ClusterError
from maxkernel_tui.kernels.executors.jobs import EvalJob, ProfileJob, TaskFiles
from maxkernel_tui.kernels.executors.ray_dispatch import NodesLost, RayDispatcher
from maxkernel_tui.kernels.limits import file_oversize_problem
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.report.checks import FAIL, Check, EvalReport
from maxkernel_tui.kernels.report.reasons import Problems, Reason, RuleBroken, StaticRule
from maxkernel_tui.kernels.task import Task

_shared: dict[str, RayDispatcher] = {}
_shared_lock = threading.Lock()


def shared_dispatcher(choice: ExecutorChoice) -> RayDispatcher:
    """This process's dispatcher on the cluster `choice` names, connected once."""
    assert choice.ray is not None
    with _shared_lock:
        if choice.ray not in _shared:
            cluster = ray_cluster.connect(choice.ray, insecure=choice.insecure)
            try:
                _shared[choice.ray] = RayDispatcher(cluster)
            except NodesLost as error:
                raise ClusterError(f"the Ray cluster at {choice.ray}: {error}") from None
        return _shared[choice.ray]


def release_shared() -> None:
    """End the node services and leave the cluster (the end of a command)."""
    with _shared_lock:
        for dispatcher in _shared.values():
            dispatcher.close()
        _shared.clear()
    ray_cluster.disconnect()


class RayTools:
    def __init__(
        self,
        dispatcher: RayDispatcher,
        task: Task,
        options: EvalOptions,
        trace_root: Path,
    ) -> None:
        """`options`: as `EvaluationSetup.of` builds them. A node profiles on the options'
        target with its own calibration (the driver's measurements stay here)."""
        self.task, self.target, self.trace_root = task, options.target, trace_root
        self.options = options
        self._dispatcher = dispatcher
        self._files = TaskFiles.of(task)
        self._reference_costs: dict[str, ReferenceCost] | None = None

    @classmethod
    def connect(cls, setup: EvaluationSetup, task: Task, trace_root: Path) -> RayTools:
        return cls(shared_dispatcher(setup.executor), task, setup.options, trace_root)

    @property
    def slots(self) -> int:
        return self._dispatcher.slots

    async def evaluate(
        self, kernel: Path, on_check: CheckListener | None = None, *, edges_only: bool = False
    ) -> EvalReport:
        if too_large := file_oversize_problem(kernel, kernel.name):
            report = EvalReport(self.task.task_id, kernel.name, [self.target], "not sent")
            broken = Problems((RuleBroken(StaticRule.TOO_LARGE, too_large),))
            report.add(Check("static", FAIL, Reason.STATIC_RULES_BROKEN, broken))
            return report
        options = replace(self.options, edges_only=edges_only)
        job = EvalJob(self._files, kernel.name, kernel.read_text(encoding="utf-8"), options)
        answer = await asyncio.to_thread(self._dispatcher.evaluate, job)
        if on_check is not None:  # the node's checks, in their order, once the report is back
            for check in answer.report.checks:
                on_check(check)
        return answer.report

    async def profile(self, kernel: Path, *, estimate_only: bool = False) -> ProfileResult:
        job = ProfileJob(
            self._files,
            kernel.name,
            kernel.read_text(encoding="utf-8"),
            self.target,
            trace=not estimate_only,
            reference_costs=self._reference_costs,
        )
        answer = await asyncio.to_thread(self._dispatcher.profile, job)
        summary = answer.summary
        if summary is None:
            return ProfileResult(None, answer.error)
        if not any(cost.error for cost in summary.reference_costs.values()):
            self._reference_costs = summary.reference_costs
        return ProfileResult(summary)

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        """On this machine: it runs only the reference (in a worker process), never a kernel."""
        return await asyncio.to_thread(validate_edge_configs, self.task, proposals)

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        self.options = with_edge_configs(self.options, configs)

    def close(self) -> None:
        """Nothing of its own: the shared dispatcher ends with the command (`release_shared`)."""
