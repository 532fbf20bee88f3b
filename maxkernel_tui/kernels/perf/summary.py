"""One profile summary: the agents read it as text, the UI as a table and a roofline bar, the CLI
as either or JSON. No jax here. Every figure carries its kind (estimated or measured) and where."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maxkernel_tui.codec import JsonData, Shape, Unknown, encode_object
from maxkernel_tui.kernels.perf.analysis import KernelAnalysis, ReferenceCost, Trace
from maxkernel_tui.kernels.perf.model import Estimate
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.report.expert import EXPERT_TUNING

BAR_WIDTH = 24
# What the XLA figure is the time of: no hand-tuned baseline, the reference itself.
XLA_MEANS = "the task's reference as written, compiled by XLA"


@dataclass
class ProfileSummary(
    JsonData,
    shape=Shape(keys={"task_id": "task"}, omit_empty=("gradients",), unknown=Unknown.IGNORE),
):
    task_id: str
    kernel: str
    config: str  # the configuration the static analysis used (production shapes)
    kernels: list[KernelAnalysis]  # static analysis of each pallas_call
    estimates: list[Estimate]
    warnings: dict[str, list[str]]  # per target
    reference_costs: dict[str, ReferenceCost]
    trace: Trace | None = None
    problems: list[str] = field(default_factory=list)  # why parts could not be produced
    calibration: dict[str, int] = field(default_factory=dict)  # TPU measurements per target
    # The task's expert baseline (Task.expert_path), estimated the same way, per target.
    expert: str | None = None
    expert_estimates: list[Estimate] = field(default_factory=list)
    # A training task's gradients: the figures are of the forward and backward kernels
    # together, against XLA's jax.vjp of the reference.
    gradients: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The codec's, each reference cost labelled with its kind and source for the
        reader (`from_json`, the codec's, drops the labels)."""
        data = encode_object(self)
        data["reference_costs"] = {
            t: dict(c, kind=Basis.ESTIMATED, source=f"XLA cost analysis, AOT compile for {t}")
            for t, c in data["reference_costs"].items()
        }
        return data

    def tolerance_passes(self) -> int | None:
        """The MXU passes XLA needs for the task's tolerance, as the profile found them."""
        found = [e.speedups.tolerance for e in self.estimates if e.speedups.tolerance]
        return found[0].passes if found else None

    def table_rows(self) -> list[tuple[str, ...]]:
        """(target, VMEM, HBM, bound, est. time, roofline, est. speedups) per generation."""
        return [
            (
                e.target,
                f"{e.vmem_bytes / 2**20:.1f}/{e.vmem_capacity / 2**20:.0f} MiB",
                f"{e.hbm_bytes / 1e9:.3g} GB",
                e.bound,
                _time(e.seconds),
                f"{e.roofline_share:.0%}" if e.roofline_share is not None else "?",
                e.speedups.short(),
            )
            for e in self.estimates
        ]

    def estimate_kind(self, estimate: Estimate) -> str:
        """ "estimated", or "estimated, calibrated by N TPU measurements"."""
        count = self.calibration.get(estimate.target, 0)
        if estimate.kind == Basis.ESTIMATED or not count:
            return estimate.kind
        return f"{estimate.kind} by {count} TPU measurement{'s' if count != 1 else ''}"

    def to_text(self) -> str:
        lines = [
            f"Profile of {self.kernel} for {self.task_id} at {self.config} shapes "
            "(all figures estimated by the model unless marked measured)"
        ]
        if self.gradients:
            lines.append(
                f"training: forward and backward kernels (the gradients of "
                f"{', '.join(self.gradients)}), one program; XLA's figures are of jax.vjp of "
                "the reference"
            )
        for index, kernel in enumerate(self.kernels):
            blocks = ", ".join(
                f"{b.role} {b.shape} {b.dtype} ({b.memory_space}, x{b.fetches})"
                for b in kernel.blocks
            )
            lines.append(
                f"kernel {index} {kernel.name}: grid {kernel.grid}{_semantics(kernel)}; "
                f"{kernel.steps} steps; {blocks}"
            )
            lines.append(
                f"  per step: {kernel.mxu_flops_per_step:.3g} MXU flops, "
                f"{kernel.vector_ops_per_step:.3g} vector ops, "
                f"{kernel.hbm_bytes / max(kernel.steps, 1) / 2**20:.2f} MiB from HBM"
            )
        for estimate in self.estimates:
            lines.append(
                f"{estimate.target} ({self.estimate_kind(estimate)}): {_time(estimate.seconds)}, "
                f"{estimate.bound}-bound; "
                f"VMEM {estimate.vmem_bytes / 2**20:.1f}/{estimate.vmem_capacity / 2**20:.0f} MiB; "
                f"HBM {estimate.hbm_bytes / 1e9:.3g} GB; {estimate.flops / 1e9:.3g} GFLOP; "
                f"roofline {_time(estimate.roofline_seconds)} "
                f"({_share(estimate.roofline_share)} of it reached); XLA reference "
                f"{_time(estimate.reference_seconds)} (the model's, from XLA's cost analysis: "
                f"{estimate.reference_precision}; dispatch "
                f"{_time(estimate.dispatch_seconds)} in both) -> est. speedup "
                f"{estimate.speedups.label()}"
            )
            if estimate.outside is not None and estimate.outside_seconds is not None:
                lines.append(
                    f"  of which {_time(estimate.outside_seconds)} outside the kernels: "
                    f"{estimate.outside.words()}"
                )
            lines.append(f"  {roofline_bar(estimate.roofline_share)}")
            lines.extend(f"  warning: {w}" for w in self.warnings.get(estimate.target, []))
            lines.extend(self._expert_line(estimate))
        if self.trace and not self.trace.dir:  # skipped; its kind says why
            lines.append(f"trace: {self.trace.kind}")
        elif self.trace:
            events = "; ".join(f"{e.name} {e.milliseconds} ms" for e in self.trace.top_events[:5])
            lines.append(
                f"trace ({self.trace.kind}, {self.trace.config} shapes): {events or 'no events'}"
            )
            if self.trace.dma is not None:
                lines.append(f"  {self.trace.dma.describe()}")
            lines.append(
                f"  open it: xprof --logdir {self.trace.dir} --port 8791 "
                "(on a TPU VM, from your machine: ssh -L 8791:localhost:8791 <vm>, then http://localhost:8791)"
            )
        lines.extend(f"not available: {p}" for p in self.problems)
        return "\n".join(lines)

    def against_xla(self, target: str) -> str:
        """The model's estimate of the kernel against XLA on `target`, in one labelled line (what
        `eval` shows beside an acceptance)."""
        found = next((e for e in self.estimates if e.target == target), None)
        if found is None or found.speedup is None:
            why = "; ".join(self.problems) or "no estimate of the kernel or of XLA's time"
            return f"against XLA on TPU {target}: not estimated ({why})"
        of = (
            f" (forward and backward, gradients of {', '.join(self.gradients)}, against XLA's "
            "jax.vjp of the reference)"
            if self.gradients
            else ""
        )
        return (
            f"against XLA on TPU {target}{of}: {found.speedups.label()} "
            f"({self.estimate_kind(found)} by the performance model at {self.config} shapes, "
            f"not measured: kernel {_time(found.seconds)}, XLA as written "
            f"{_time(found.reference_seconds)}; XLA as written means {XLA_MEANS}, "
            f"{found.reference_precision}; XLA@tolerance means the same reference at the MXU "
            "passes the task's tolerance needs)"
        )

    def _expert_line(self, kernel: Estimate) -> list[str]:
        expert = next((e for e in self.expert_estimates if e.target == kernel.target), None)
        if expert is None or not kernel.seconds:
            return []
        return [
            f"  expert {self.expert} ({EXPERT_TUNING}; {expert.kind}): {_time(expert.seconds)} on "
            f"{expert.target}"
            f" -> this kernel at {expert.seconds / kernel.seconds:.2f}x of the expert (estimated)"
        ]


def _semantics(kernel: KernelAnalysis) -> str:
    """` (parallel, arbitrary)`: each grid axis's semantics, or what Mosaic takes when the
    kernel states none (every axis arbitrary)."""
    if not kernel.grid:
        return " (no grid: one step)"
    if kernel.dimension_semantics:
        return f" ({', '.join(kernel.dimension_semantics)})"
    default = ", ".join(["arbitrary"] * len(kernel.grid))
    return f" ({default}: not stated, Mosaic's default)"


def roofline_bar(share: float | None, width: int = BAR_WIDTH) -> str:
    if share is None:
        return "roofline: unknown"
    filled = max(0, min(width, round(share * width)))
    return f"{'█' * filled}{'░' * (width - filled)} {share:.0%} of roofline (estimated)"


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _share(share: float | None) -> str:
    return f"{share:.0%}" if share is not None else "?"


def _speedup(speedup: float | None) -> str:
    return f"{speedup:.2f}x" if speedup is not None else "?"
