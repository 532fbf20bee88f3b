"""What the engine needs of the world, as protocols (`Tools`, `Client`), and the real tools
(`KernelTools`): the evaluation service (kernels/service) run off the event loop (it blocks on
worker processes or a Ray node) so that the UI and model streams keep going. The engine, its
gates and the search depend on the protocols only; tests give them in-process fakes. No jax."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

from maxkernel_tui.agents.llm.types import Request, StreamChunk
from maxkernel_tui.kernels.edge_configs import EdgeConfig
from maxkernel_tui.kernels.evaluation.options import EvalOptions, Probe
from maxkernel_tui.kernels.report.checks import EvalReport
from maxkernel_tui.kernels.service.service import (
    CheckListener,
    EvaluationService,
    HarnessFactory,
    KernelSource,
    ProfileResult,
)
from maxkernel_tui.kernels.service.setup import EvaluationSetup
from maxkernel_tui.kernels.task import Task


class Tools(Protocol):
    """The harness and the profiler on one task and TPU target."""

    task: Task
    target: str

    async def evaluate(
        self,
        kernel: KernelSource,
        on_check: CheckListener | None = None,
        *,
        edges_only: bool = False,
    ) -> EvalReport:
        """The harness's report; `edges_only`: numerics on the edge cases alone, for a kernel
        already accepted (EvalOptions.edges_only)."""
        ...

    async def profile(
        self, kernel: KernelSource, *, estimate_only: bool = False
    ) -> ProfileResult: ...

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


class KernelTools:
    """The `Tools` of a session: each call is the service's, in a thread."""

    def __init__(self, service: EvaluationService) -> None:
        self.service = service
        self.task, self.target = service.task, service.target

    @property
    def options(self) -> EvalOptions:
        return self.service.options

    @property
    def slots(self) -> int:
        """Evaluations the executor runs at once (the search's concurrency)."""
        return self.service.slots

    async def evaluate(
        self,
        kernel: KernelSource,
        on_check: CheckListener | None = None,
        *,
        edges_only: bool = False,
    ) -> EvalReport:
        return await asyncio.to_thread(
            self.service.evaluate, kernel, on_check, edges_only=edges_only
        )

    async def probe(self, kernel: KernelSource, probe: Probe) -> EvalReport:
        return await asyncio.to_thread(self.service.probe, kernel, probe)

    async def profile(self, kernel: KernelSource, *, estimate_only: bool = False) -> ProfileResult:
        return await asyncio.to_thread(self.service.profile, kernel, estimate_only=estimate_only)

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        return await asyncio.to_thread(self.service.validate_edge_configs, proposals)

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        self.service.set_extra_configs(configs)

    def estimate_on(self, target: str) -> None:
        """Score on `target` from now on (EvaluationService.estimate_on)."""
        self.service.estimate_on(target)
        self.target = target

    def close(self) -> None:
        self.service.close()


def build_tools(
    setup: EvaluationSetup, task: Task, trace_root: Path, harness: HarnessFactory | None = None
) -> KernelTools:
    """The tools on the setup's executor, with its options; a cluster that cannot be used
    raises ClusterError (a ValueError) here, before any model call."""
    return KernelTools(EvaluationService(setup, task, trace_root, harness=harness))
