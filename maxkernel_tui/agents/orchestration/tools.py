"""The engine's tools: the immutable harness and the profiler, run off the event loop (they block
on worker processes) so that the UI and model streams keep going. No jax here."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from maxkernel_tui.kernels.edge_configs import EdgeConfig, validate_edge_configs
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, Harness
from maxkernel_tui.kernels.evaluation.report import Check
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.profile import ProfileError, profile_kernel
from maxkernel_tui.kernels.task import Task


class KernelTools:
    def __init__(
        self,
        task: Task,
        target: str,
        trace_root: Path,
        *,
        seeds: int = 2,
        harness: Callable[[], Harness] | None = None,
    ) -> None:
        """`harness`: a shared one (the TUI's), which `close` leaves running; else one of our own."""
        self.task, self.target, self.trace_root = task, target, trace_root
        self.options = EvalOptions(target=target, seeds=seeds)
        self._shared = harness
        self._harness: Harness | None = None
        self._reference_costs: dict[str, ReferenceCost] | None = None
        self._lock = (
            threading.Lock()
        )  # one evaluation at a time: the harness owns one reference process

    def _get_harness(self) -> Harness:
        if self._shared is not None:
            return self._shared()
        if self._harness is None:
            self._harness = Harness()
        return self._harness

    async def evaluate(
        self, kernel: Path, on_check: Callable[[Check], None] | None = None
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            with self._lock:
                return (
                    self._get_harness()
                    .evaluate(kernel, self.task, self.options, on_check)
                    .to_json()
                )

        return await asyncio.to_thread(run)

    def set_extra_configs(self, configs: list[EdgeConfig]) -> None:
        """Edge-case configurations every later evaluation checks too (the `edge` check)."""
        self.options = replace(
            self.options, extra_configs=tuple((name, dict(params)) for name, params in configs)
        )

    async def validate_edge_configs(
        self, proposals: list[EdgeConfig]
    ) -> tuple[list[EdgeConfig], list[str]]:
        """(accepted, reasons for the rejected); the reference runs in a worker process."""
        return await asyncio.to_thread(validate_edge_configs, self.task, proposals)

    async def profile(
        self, kernel: Path, *, estimate_only: bool = False
    ) -> tuple[dict[str, Any] | None, str, str | None]:
        """(summary as JSON, as text, error); the summary is None when the profile failed.
        `estimate_only`: the model's estimate without running the kernel (autotune candidates); the
        reference's XLA cost is compiled once per session and reused."""

        def run() -> tuple[dict[str, Any] | None, str, str | None]:
            try:
                summary = profile_kernel(
                    kernel,
                    self.task,
                    targets=(self.target,),
                    trace_root=self.trace_root,
                    trace=not estimate_only,
                    reference_costs=self._reference_costs,
                )
            except ProfileError as error:
                return None, "", str(error)
            if not any(cost.error for cost in summary.reference_costs.values()):
                self._reference_costs = summary.reference_costs
            return summary.to_json(), summary.to_text(), None

        return await asyncio.to_thread(run)

    def close(self) -> None:
        if self._harness is not None:
            self._harness.close()
            self._harness = None
