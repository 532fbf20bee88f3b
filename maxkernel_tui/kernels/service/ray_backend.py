"""The service's evaluations and profiles on a Ray cluster: each goes, as the kernel's source and
the task folder's files (nothing from this process's environment), to a node's long-lived
service, and comes back as the same typed report the local harness gives, with the node that
produced it. One dispatcher per process, shared by the services of a suite. Imports Ray; no
jax."""

from __future__ import annotations

import threading
from collections.abc import Callable

from maxkernel_tui.kernels.evaluation.options import EvalOptions
from maxkernel_tui.kernels.evaluation.profiling.profile import ProfileError
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.executors import ray_cluster
from maxkernel_tui.kernels.executors.errors import ClusterError
from maxkernel_tui.kernels.executors.jobs import EvalJob, ProfileJob, TaskFiles
from maxkernel_tui.kernels.executors.ray_dispatch import NodesLost, RayDispatcher
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import Check, EvalReport
from maxkernel_tui.kernels.task import Task

_shared: dict[str, RayDispatcher] = {}
_shared_lock = threading.Lock()


def shared_dispatcher(address: str, insecure: bool) -> RayDispatcher:
    """This process's dispatcher on the cluster at `address`, connected once."""
    with _shared_lock:
        if address not in _shared:
            cluster = ray_cluster.connect(address, insecure=insecure)
            try:
                _shared[address] = RayDispatcher(cluster)
            except NodesLost as error:
                raise ClusterError(f"the Ray cluster at {address}: {error}") from None
        return _shared[address]


def release_shared() -> None:
    """End the node services and leave the cluster (the end of a command)."""
    with _shared_lock:
        for dispatcher in _shared.values():
            dispatcher.close()
        _shared.clear()
    ray_cluster.disconnect()


class RayBackend:
    """A node profiles on the options' target with its own calibration (the driver's
    measurements stay here)."""

    def __init__(self, dispatcher: RayDispatcher, task: Task, target: str) -> None:
        self.task, self.target = task, target
        self._dispatcher = dispatcher
        self._files = TaskFiles.of(task)

    @classmethod
    def connect(cls, address: str, insecure: bool, task: Task, target: str) -> RayBackend:
        return cls(shared_dispatcher(address, insecure), task, target)

    @property
    def slots(self) -> int:
        return self._dispatcher.slots

    def evaluate(
        self,
        kernel: KernelSource,
        options: EvalOptions,
        on_check: Callable[[Check], None] | None,
    ) -> EvalReport:
        if refusal := kernel.refusal:
            report = EvalReport(self.task.task_id, kernel.name, [self.target], "not sent")
            report.add(refusal)
            return report
        answer = self._dispatcher.evaluate(EvalJob(self._files, kernel, options))
        if on_check is not None:  # the node's checks, in their order, once the report is back
            for check in answer.report.checks:
                on_check(check)
        return answer.report

    def profile(
        self,
        kernel: KernelSource,
        *,
        trace: bool,
        reference_costs: dict[str, ReferenceCost] | None,
        tolerance_passes: int | None = None,
    ) -> ProfileSummary:
        job = ProfileJob(self._files, kernel, self.target, trace, reference_costs, tolerance_passes)
        answer = self._dispatcher.profile(job)
        if answer.summary is None:
            raise ProfileError(answer.error or "the node sent no profile")
        return answer.summary

    def close(self) -> None:
        """Nothing of its own: the shared dispatcher ends with the command (`release_shared`)."""
