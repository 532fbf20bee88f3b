"""The built-in agent's kernel for a task, judged by the real harness."""

from __future__ import annotations

from pathlib import Path

from maxkernel_tui.agents.builtin import draft_kernel
from maxkernel_tui.kernels.evaluation.harness import EvalOptions, EvalReport, Harness
from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.task import Task


def judged_draft(
    harness: Harness, task: Task, folder: Path, *, tune: bool = True, must_contain: str = ""
) -> EvalReport:
    """The built-in agent's kernel for `task`, written to `folder` and judged by `harness` (one
    fresh seed and the held-out shapes); `must_contain`: text the kernel must have."""
    source = draft_kernel(task, tune=tune).source
    assert must_contain in source
    kernel = folder / "kernel.py"
    kernel.write_text(source)
    return harness.evaluate(KernelSource.read(kernel), task, EvalOptions(seeds=1))
