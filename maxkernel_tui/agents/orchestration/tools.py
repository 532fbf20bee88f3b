"""What the engine needs of the world, as protocols (`Tools`, `Client`), and the real tools
(`KernelTools`): the immutable harness and the profiler, run off the event loop (they block on
worker processes) so that the UI and model streams keep going. The engine, its gates and the
search depend on the protocols only; tests give them in-process fakes. No jax here."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from maxkernel_tui.agents.llm.types import Request, StreamChunk
from maxkernel_tui.kernels.catalog import described_reference_cost
from maxkernel_tui.kernels.edge_configs import EdgeConfig, validate_edge_configs
from maxkernel_tui.kernels.evaluation.harness import Harness
from maxkernel_tui.kernels.evaluation.options import EvalOptions, Probe
from maxkernel_tui.kernels.evaluation.profiling.profile import (
    ProfileError,
    ProfileOptions,
    profile_kernel,
)
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.summary import ProfileSummary
from maxkernel_tui.kernels.report.checks import Check, EvalReport
from maxkernel_tui.kernels.task import Task

CheckListener = Callable[[Check], None]


@dataclass(frozen=True)
class ProfileResult:
    """A profile: its summary, or why there is none."""

    summary: ProfileSummary | None
    error: str | None = None

    @property
    def text(self) -> str:
        """The summary as the agents read it ("" without one)."""
        return "" if self.summary is None else self.summary.to_text()


class Tools(Protocol):
    """The harness and the profiler on one task and TPU target."""

    task: Task
    target: str

    async def evaluate(
        self, kernel: Path, on_check: CheckListener | None = None, *, edges_only: bool = False
    ) -> EvalReport:
        """The harness's report; `edges_only`: numerics on the edge cases alone, for a kernel
        already accepted (EvalOptions.edges_only)."""
        ...

    async def profile(self, kernel: Path, *, estimate_only: bool = False) -> ProfileResult: ...

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]: ...

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None: ...


class Client(Protocol):
    """What the engine asks of a model client (`LLMClient`): one call's chunks, ending in `Done`.
    Chunk types the engine does not know are ignored."""

    def stream(
        self, request: Request, *, parse: Callable[[str], Any] | None = None
    ) -> AsyncIterator[StreamChunk]: ...


def with_edge_configs(options: EvalOptions, configs: list[EdgeConfig]) -> EvalOptions:
    """`options` with edge-case configurations every later evaluation checks too."""
    return replace(options, extra_configs=tuple((name, dict(params)) for name, params in configs))


class KernelTools:
    slots = 1  # evaluations at once: the harness owns one reference process

    def __init__(
        self,
        task: Task,
        options: EvalOptions,
        trace_root: Path,
        *,
        profile: ProfileOptions | None = None,
        harness: Callable[[], Harness] | None = None,
    ) -> None:
        """`options`, `profile`: as `EvaluationSetup.of` builds them (agents.executors.choice);
        `profile` None: the options' target, uncalibrated. `harness`: a shared one (the TUI's),
        which `close` leaves running; else our own."""
        self.task, self.target, self.trace_root = task, options.target, trace_root
        self.options = options
        self.profile_options = profile or ProfileOptions((options.target,))
        self._shared = harness
        self._harness: Harness | None = None
        self._reference_costs: dict[str, ReferenceCost] | None = None
        # one evaluation at a time: the harness owns one reference process
        self._lock = threading.Lock()

    def _get_harness(self) -> Harness:
        if self._shared is not None:
            return self._shared()
        if self._harness is None:
            self._harness = Harness()
        return self._harness

    async def evaluate(
        self, kernel: Path, on_check: CheckListener | None = None, *, edges_only: bool = False
    ) -> EvalReport:
        options = replace(self.options, edges_only=edges_only)

        def run() -> EvalReport:
            with self._lock:
                return self._get_harness().evaluate(kernel, self.task, options, on_check)

        return await asyncio.to_thread(run)

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        """Edge-case configurations every later evaluation checks too (the `edge` check)."""
        self.options = with_edge_configs(self.options, configs)

    async def probe(self, kernel: Path, probe: Probe) -> EvalReport:
        """An agent tool's quick look at a candidate (Harness.probe), between evaluations."""

        def run() -> EvalReport:
            with self._lock:
                return self._get_harness().probe(kernel, self.task, probe)

        return await asyncio.to_thread(run)

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        """(accepted, reasons for the rejected); the reference runs in a worker process."""
        return await asyncio.to_thread(validate_edge_configs, self.task, proposals)

    async def profile(self, kernel: Path, *, estimate_only: bool = False) -> ProfileResult:
        """`estimate_only`: the model's estimate without running the kernel (autotune candidates);
        the reference's XLA cost is compiled once per session and reused."""

        def run() -> ProfileResult:
            if self._reference_costs is None and (
                known := described_reference_cost(self.task, self.target)
            ):
                self._reference_costs = {self.target: known}
            try:
                summary = profile_kernel(
                    kernel,
                    self.task,
                    targets=self.profile_options.targets,
                    trace_root=self.trace_root,
                    calibration_file=self.profile_options.calibration_file,
                    trace=not estimate_only,
                    reference_costs=self._reference_costs,
                )
            except ProfileError as error:
                return ProfileResult(None, str(error))
            if not any(cost.error for cost in summary.reference_costs.values()):
                self._reference_costs = summary.reference_costs
            return ProfileResult(summary)

        return await asyncio.to_thread(run)

    def close(self) -> None:
        if self._harness is not None:
            self._harness.close()
            self._harness = None
