"""`EvaluationService`: the one way in to judging, probing and profiling the kernels of one task
on one `EvaluationSetup`, on this machine's harness or on a Ray cluster (`ray_backend`). The
`eval`, `profile` and `bench` commands, the workbench's ctrl+e and ctrl+o and the agents' tools
(agents/orchestration/tools.py, async wrappers over this) all call it. A kernel comes as a
`KernelSource` (its text); each call snapshots the task once, and every worker it starts reads
that snapshot. Synchronous: calls block on worker processes or a node (a caller on an event loop
runs them in a thread). No jax; Ray only when it is chosen."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from maxkernel_tui.kernels.catalog import described_reference_cost
from maxkernel_tui.kernels.edge_configs import EdgeConfig, validate_edge_configs
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.evaluation.options import EvalOptions, Probe, UsageError
from maxkernel_tui.kernels.evaluation.profiling.profile import (
    ProfileError,
    ProfileOptions,
    profile_kernel,
)
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import Check, EvalReport
from maxkernel_tui.kernels.service.setup import EvaluationSetup
from maxkernel_tui.kernels.task import Task

# what callers hand in and get back
__all__ = [
    "CheckListener",
    "EvaluationService",
    "Harness",
    "HarnessFactory",
    "KernelSource",
    "ProfileResult",
    "UsageError",
]

CheckListener = Callable[[Check], None]
HarnessFactory = Callable[[], Harness]  # a shared harness (the TUI's), started on first use


@dataclass(frozen=True)
class ProfileResult:
    """A profile: its summary, or why there is none."""

    summary: ProfileSummary | None
    error: str | None = None

    @property
    def text(self) -> str:
        """The summary as the agents read it ("" without one)."""
        return "" if self.summary is None else self.summary.to_text()


class Backend(Protocol):
    """Where the service's evaluations and profiles run."""

    @property
    def slots(self) -> int: ...

    def evaluate(
        self, kernel: KernelSource, options: EvalOptions, on_check: CheckListener | None
    ) -> EvalReport: ...

    def profile(
        self,
        kernel: KernelSource,
        *,
        trace: bool,
        reference_costs: dict[str, ReferenceCost] | None,
        tolerance_passes: int | None = None,
    ) -> ProfileSummary:
        """The profile, or ProfileError saying why there is none."""
        ...

    def close(self) -> None: ...


class LocalBackend:
    """This machine's harness (one evaluation at a time: it owns one reference process) and
    profiler, on the setup's profile options."""

    slots = 1

    def __init__(
        self, task: Task, profile: ProfileOptions, trace_root: Path, harness: HarnessFactory | None
    ) -> None:
        """`harness`: a shared one, which `close` leaves running; else our own, made on first
        use."""
        self.task, self.profile_options, self.trace_root = task, profile, trace_root
        self._shared = harness
        self._own: Harness | None = None
        self._lock = threading.Lock()

    def _harness(self) -> Harness:
        if self._shared is not None:
            return self._shared()
        if self._own is None:
            self._own = Harness()
        return self._own

    def evaluate(
        self, kernel: KernelSource, options: EvalOptions, on_check: CheckListener | None
    ) -> EvalReport:
        with self._lock:
            return self._harness().evaluate(kernel, self.task, options, on_check)

    def probe(self, kernel: KernelSource, probe: Probe) -> EvalReport:
        with self._lock:
            return self._harness().probe(kernel, self.task, probe)

    def profile(
        self,
        kernel: KernelSource,
        *,
        trace: bool,
        reference_costs: dict[str, ReferenceCost] | None,
        tolerance_passes: int | None = None,
    ) -> ProfileSummary:
        return profile_kernel(
            kernel,
            self.task,
            targets=self.profile_options.targets,
            trace_root=self.trace_root,
            calibration_file=self.profile_options.calibration_file,
            trace=trace,
            reference_costs=reference_costs,
            tolerance_passes=tolerance_passes,
        )

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None


class EvaluationService:
    """The harness and the profiler on one task, with one setup's options and executor."""

    def __init__(
        self,
        setup: EvaluationSetup,
        task: Task,
        trace_root: Path,
        *,
        harness: HarnessFactory | None = None,
    ) -> None:
        """`trace_root`: where profiles keep their traces. `harness`: the local executor's
        shared harness (else the service starts its own when it first evaluates). On Ray this
        connects to the cluster: one that cannot be used raises ClusterError (a ValueError)."""
        self.task, self.options = task, setup.options
        self._reference_costs: dict[str, ReferenceCost] | None = None
        self._tolerance_passes: int | None = None  # found by the first profile
        self._backend: Backend
        ray = setup.executor.ray
        if ray is None:
            self._backend = LocalBackend(task, setup.profile, trace_root, harness)
        else:
            from maxkernel_tui.kernels.service.ray_backend import RayBackend

            insecure = setup.executor.insecure
            self._backend = RayBackend.connect(ray, insecure, task, self.options.target)

    @property
    def target(self) -> str:
        return self.options.target

    @property
    def slots(self) -> int:
        """Evaluations that can run at once."""
        return self._backend.slots

    @property
    def probes(self) -> bool:
        """Whether `probe` can run here (this machine's harness; Ray nodes run no probes)."""
        return isinstance(self._backend, LocalBackend)

    def evaluate(
        self,
        kernel: KernelSource,
        on_check: CheckListener | None = None,
        *,
        edges_only: bool = False,
    ) -> EvalReport:
        """The harness's report; `edges_only`: numerics on the edge cases alone, for a kernel
        already accepted (EvalOptions.edges_only). UsageError for a request that cannot be
        made (a TPU generation libtpu does not know)."""
        options = replace(self.options, edges_only=edges_only)
        return self._backend.evaluate(kernel, options, on_check)

    def probe(self, kernel: KernelSource, probe: Probe) -> EvalReport:
        """An agent tool's quick look at a candidate (Harness.probe), between evaluations."""
        if not isinstance(self._backend, LocalBackend):
            raise UsageError("this executor runs no probes")
        return self._backend.probe(kernel, probe)

    def profile(self, kernel: KernelSource, *, estimate_only: bool = False) -> ProfileResult:
        """`estimate_only`: the model's estimate without running the kernel (autotune candidates);
        the reference's XLA cost (described with the task, else compiled by the first profile)
        and the MXU passes XLA needs for the tolerance (found by the first) are reused by every
        later one."""
        if self._reference_costs is None and (
            known := described_reference_cost(self.task, self.target)
        ):
            self._reference_costs = {self.target: known}
        try:
            summary = self._backend.profile(
                kernel,
                trace=not estimate_only,
                reference_costs=self._reference_costs,
                tolerance_passes=self._tolerance_passes,
            )
        except ProfileError as error:
            return ProfileResult(None, str(error))
        if not any(cost.error for cost in summary.reference_costs.values()):
            self._reference_costs = summary.reference_costs
        self._tolerance_passes = self._tolerance_passes or summary.tolerance_passes()
        return ProfileResult(summary)

    def estimate_on(self, target: str) -> None:
        """Profiles from now on estimate on `target` too (a search whose score the engineer
        moved to another TPU generation); evaluations keep compiling for the setup's."""
        if not isinstance(self._backend, LocalBackend):
            raise UsageError("this executor profiles on the cluster's own target")
        options = self._backend.profile_options
        if target not in options.targets:
            self._backend.profile_options = replace(options, targets=(*options.targets, target))

    def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        """(accepted, reasons for the rejected), on this machine whatever the executor: the
        reference runs in a worker process, never a kernel."""
        return validate_edge_configs(self.task, proposals)

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        """Edge-case configurations every later evaluation checks too (the `edge` check)."""
        extra = tuple((name, dict(params)) for name, params in configs)
        self.options = replace(self.options, extra_configs=extra)

    def close(self) -> None:
        """Ends the workers the service started (a shared harness and a shared Ray dispatcher
        end with their owner)."""
        self._backend.close()
