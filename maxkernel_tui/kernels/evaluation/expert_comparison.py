"""The kernel beside the task's expert baseline (jax's own Pallas kernel with JAXBench's tuning, or
a JAXBench `optimized.py`): `Task.expert_path`. No jax here.

Off a TPU the figure is the performance model's: both programs are analysed statically at
production shapes (evaluation/profiling/profile.py with no trace) and estimated for the
evaluation's TPU generation. On a TPU it is measured: the timing worker times the expert
interleaved with the kernel and the XLA reference (evaluation/timing/check.py), with the
same statistics.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from maxkernel_tui.kernels.evaluation.source import KernelSource
from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.report.checks import PASS, SKIP, Check, Timing
from maxkernel_tui.kernels.report.expert import EXPERT_SPEEDUP, ExpertComparison
from maxkernel_tui.kernels.report.reasons import At, Reason
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.snapshot import TaskSnapshot

CHECK_NAME = CheckName.EXPERT
# Kernel against expert needs no XLA cost of the reference: the profile skips that compile.
_NOT_NEEDED = ReferenceCost(error="not needed to compare with the expert")


def from_estimates(kernel: Estimate, expert: Estimate, expert_name: str) -> ExpertComparison:
    return ExpertComparison(
        kind=Basis.ESTIMATED,
        where=f"{kernel.target} (performance model, production shapes)",
        expert=expert_name,
        kernel_s=kernel.seconds,
        expert_s=expert.seconds,
        ratio=expert.seconds / kernel.seconds if kernel.seconds else 0.0,
    )


def measured(expert_name: str, timings: list[Timing]) -> ExpertComparison | None:
    """The comparison from the timing check's figures on a TPU (None when not timed)."""
    by_what = {t.what: t for t in timings}
    gain, kernel, expert = (by_what.get(w) for w in (EXPERT_SPEEDUP, "kernel", "expert"))
    if gain is None or kernel is None or expert is None or gain.ratio is None:
        return None
    return ExpertComparison(
        kind=Basis.MEASURED,
        where=gain.device,
        expert=expert_name,
        kernel_s=kernel.median_s or 0.0,
        expert_s=expert.median_s or 0.0,
        ratio=gain.ratio,
        ci95=gain.ci95,
    )


def estimated_expert_check(
    kernel: KernelSource, snapshot: TaskSnapshot, target: str, timeout: float
) -> tuple[Check, ExpertComparison | None]:
    """The model's estimate of the kernel against the expert on `target` (no TPU needed), on
    the evaluation's snapshot of the task."""
    from maxkernel_tui.kernels.evaluation.profiling.profile import ProfileError, profile_kernel

    expert = snapshot.task.expert_path
    assert expert is not None
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="mkt-expert-") as traces:
            # the kernel's profile estimates the task's expert beside it (profile._add_expert)
            summary = profile_kernel(
                kernel,
                snapshot,
                targets=(target,),
                trace_root=Path(traces),
                trace=False,
                timeout=timeout,
                reference_costs={target: _NOT_NEEDED},
            )
    except ProfileError as error:
        failed = At(expert.name, str(error))
        return Check(CHECK_NAME, SKIP, Reason.EXPERT_NOT_COMPARED, failed), None
    if not (summary.estimates and summary.expert_estimates):
        why = "; ".join(summary.problems) or "no estimate for the kernel or the expert"
        failed = At(expert.name, why)
        return Check(CHECK_NAME, SKIP, Reason.EXPERT_NOT_COMPARED, failed), None
    comparison = from_estimates(summary.estimates[0], summary.expert_estimates[0], expert.name)
    seconds = round(time.monotonic() - started, 3)
    return Check(CHECK_NAME, PASS, Reason.EXPERT_COMPARED, comparison, seconds), comparison
