"""The portability matrix of one kernel: for each TPU generation, whether libtpu compiles it at
production shapes (and the compiler's reason when it does not), the VMEM its blocks take, and the
performance model's time against XLA and against the task's expert. The compile is the
evaluation's own TPU-compile check, run as a probe per generation (Harness.probe through
TPU_COMPILE: the real compiler, scoped VMEM limits included); the figures are one estimate-only
profile over every generation. Both run in the sandboxed worker processes. No jax here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from maxkernel_tui.codec import JsonData
from maxkernel_tui.kernels.perf.vs_xla import VsXla
from maxkernel_tui.kernels.report.checks import FAIL, EvalReport
from maxkernel_tui.kernels.report.status import CheckName, Verdict
from maxkernel_tui.kernels.targets import TARGETS

if TYPE_CHECKING:  # the card's readers need the row, not the evaluation service
    from maxkernel_tui.kernels.perf.summary import ProfileSummary
    from maxkernel_tui.kernels.service.service import EvaluationService, KernelSource

# every TPU target the tool knows, oldest generation first: the columns every card shows
GENERATIONS = tuple(sorted(TARGETS, key=lambda name: (TARGETS[name].generation, name)))
ESTIMATED = "estimated by the performance model at production shapes (not measured)"


@dataclass(frozen=True)
class PortabilityRow(JsonData):
    """One generation's column of the matrix. `compiles` None: the compile did not get that far
    (an earlier check refused the kernel, named in `reason`)."""

    target: str
    compiles: bool | None
    reason: str  # the compiler's words when it refused, else ""
    vmem_bytes: int | None = None  # the model's VMEM footprint of the blocks
    vmem_capacity: int | None = None
    seconds: float | None = None  # the model's time for the kernel
    xla_seconds: float | None = None  # ... for the XLA reference as written
    vs_xla: VsXla | None = None  # both speedups over XLA (perf/vs_xla.py)
    expert_seconds: float | None = None
    vs_expert: float | None = None  # expert_seconds / seconds: above 1, faster than the expert
    basis: str = ESTIMATED


def portability(
    service: EvaluationService, kernel: KernelSource, trace_root: Path
) -> list[PortabilityRow]:
    """The matrix of `kernel` on `service`'s task (this machine's harness: probes run here)."""
    from maxkernel_tui.kernels.evaluation.options import Probe
    from maxkernel_tui.kernels.evaluation.profiling.profile import ProfileError, profile_kernel
    from maxkernel_tui.kernels.evaluation.protocol import ProbeStage

    task = service.task
    production = task.configs[0]
    compiled = {
        target: service.probe(
            kernel, Probe(config=production, through=ProbeStage.TPU_COMPILE, target=target)
        )
        for target in GENERATIONS
    }
    try:
        summary: ProfileSummary | None = profile_kernel(
            kernel, task, targets=GENERATIONS, trace_root=trace_root, trace=False
        )
    except ProfileError:
        summary = None
    return [_row(target, compiled[target], summary) for target in GENERATIONS]


def _row(target: str, report: EvalReport, summary: ProfileSummary | None) -> PortabilityRow:
    compile_check = next((c for c in report.checks if c.name == CheckName.TPU_COMPILE), None)
    failure = report.failure
    if compile_check is not None:
        compiles: bool | None = compile_check.status != FAIL
        reason = compile_check.detail if compile_check.status == FAIL else ""
    else:
        compiles = None if report.verdict != Verdict.ACCEPTED or failure else True
        reason = f"not compiled: {failure.name}: {failure.detail}" if failure else ""
    row = PortabilityRow(target, compiles, reason)
    if summary is None:
        return row
    found = next((e for e in summary.estimates if e.target == target), None)
    expert = next((e for e in summary.expert_estimates if e.target == target), None)
    if found is None:
        return row
    return PortabilityRow(
        target,
        compiles,
        reason,
        found.vmem_bytes,
        found.vmem_capacity,
        found.seconds,
        found.reference_seconds,
        found.speedups,
        expert.seconds if expert else None,
        expert.seconds / found.seconds if expert and found.seconds else None,
        summary.estimate_kind(found) + " by the performance model at production shapes",
    )
