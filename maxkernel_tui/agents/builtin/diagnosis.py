"""The built-in profiler: a profile summary (kernels/perf/summary.py, as JSON) in, a short
diagnosis and the single next thing to try out. Reads figures only; no jax here.

The rules go from what stops a kernel from running at all (VMEM), through what wastes the
hardware most (per-step overhead, re-fetched operands, f32 MXU passes), to "close to the
roofline": the first that applies gives the `Next:` line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from maxkernel_tui.agents.builtin.errors import BuiltinAgentError
from maxkernel_tui.kernels.perf.analysis import Bound, KernelAnalysis
from maxkernel_tui.kernels.perf.model import HIGHEST_MXU_PASSES, TINY_STEP_BYTES, Estimate
from maxkernel_tui.kernels.perf.summary import ProfileSummary

# A kernel within this share of the roofline has little left to gain from tiling.
NEAR_ROOFLINE = 0.8


@dataclass(frozen=True)
class KernelFigures:
    """What the profiler reads of one kernel's static analysis (pallas_analysis.analyze)."""

    name: str
    grid: list[int]
    semantics: list[str] | None
    steps: int
    hbm_bytes: int
    highest_mxu: bool  # whether it runs matmuls at Precision.HIGHEST (six MXU passes)

    @classmethod
    def of(cls, kernel: KernelAnalysis) -> KernelFigures:
        return cls(
            kernel.name,
            kernel.grid,
            kernel.dimension_semantics or None,
            kernel.steps,
            kernel.hbm_bytes,
            bool(kernel.mxu_highest_flops_per_step),
        )

    @property
    def per_step_bytes(self) -> float:
        return self.hbm_bytes / max(self.steps, 1)


def diagnose(profile: Mapping[str, Any], target: str) -> str:
    """Markdown: what the profile (ProfileSummary.to_json()) says, then one line starting
    `Next:`. BuiltinAgentError when it is not a profile summary."""
    summary = _summary(profile)
    kernels = [KernelFigures.of(kernel) for kernel in summary.kernels]
    estimates = summary.estimates
    found = next((e for e in estimates if e.target == target), estimates[0] if estimates else None)
    lines = [
        (
            f"## Diagnosis ({found.target if found else target}, figures estimated by the "
            "performance model unless marked measured)"
        ),
        "",
    ]
    if found is not None:
        share = found.roofline_share
        roofline = (
            f"{share * 100:.0f}% of the roofline" if share is not None else "roofline unknown"
        )
        lines.append(
            f"- {found.seconds * 1e3:.3f} ms, {found.bound}-bound; {roofline}; "
            f"VMEM {found.vmem_bytes / 2**20:.1f} of {found.vmem_capacity / 2**20:.0f} MiB; "
            f"HBM traffic {found.hbm_bytes / 1e9:.3g} GB."
        )
    for index, kernel in enumerate(kernels):
        lines.append(
            f"- kernel {index} `{kernel.name}`: grid {kernel.grid} {kernel.semantics or ''}, "
            f"{kernel.steps} steps, {kernel.per_step_bytes / 1024:.0f} KiB from HBM per step."
        )
    warnings = summary.warnings.get(found.target if found else target, [])
    lines += [f"- warning: {warning}" for warning in warnings]
    lines += [f"- not available: {problem}" for problem in summary.problems]
    lines += ["", "Next: " + next_step(kernels, found, warnings)]
    return "\n".join(lines) + "\n"


def next_step(kernels: list[KernelFigures], found: Estimate | None, warnings: list[str]) -> str:
    if not kernels:
        return "write the computation as a pallas_call: the profile found no Pallas kernel to tune."
    if found is not None and not found.fits_vmem:
        return (
            "halve the largest block size (BLOCK_ROWS or BLOCK_COLS): the VMEM footprint "
            f"{found.vmem_bytes / 2**20:.1f} MiB is over the {found.vmem_capacity / 2**20:.0f} "
            "MiB there is."
        )
    if any("(8, 128)" in w for w in warnings):
        return (
            "make each block's last two dimensions multiples of (8, 128) or the array's own sizes."
        )
    busiest = max(kernels, key=lambda k: k.steps)
    if (found is not None and found.bound == Bound.OVERHEAD) or (
        busiest.steps > 64 and busiest.per_step_bytes < TINY_STEP_BYTES
    ):
        return (
            f"raise the block sizes of `{busiest.name}`: {busiest.steps} grid steps moving "
            f"{busiest.per_step_bytes / 1024:.0f} KiB each pay the per-step overhead more than "
            "the work."
        )
    share = found.roofline_share if found is not None else None
    if share is not None and share >= NEAR_ROOFLINE:
        return (
            f"stop tuning the tiles: the estimate is at {share:.0%} of the roofline; only fusing "
            "more of the computation into the kernel, or a different algorithm, would gain more."
        )
    if found is not None and found.bound == Bound.COMPUTE:
        if any(k.highest_mxu for k in kernels):
            return (
                f"matmuls at Precision.HIGHEST take {HIGHEST_MXU_PASSES:.0f} MXU passes: split "
                "each f32 operand into bf16 high and low parts (three passes, close to f32), or "
                "feed bf16 operands with f32 accumulation (one) if the tolerance allows."
            )
        return (
            "cut the vector work per step (transcendentals, casts, broadcasts recomputed in the "
            "body)."
        )
    return (
        "raise BLOCK_ROWS and BLOCK_COLS (or BLOCK_DEPTH for a matmul) so each operand is fetched "
        "from HBM fewer times: the kernel is memory-bound below the roofline."
    )


def _summary(profile: Mapping[str, Any]) -> ProfileSummary:
    try:
        return ProfileSummary.from_json(dict(profile))
    except (KeyError, TypeError, ValueError) as error:  # ValueError: the codec's CodecError
        raise BuiltinAgentError(
            f"the profiler step's profile is not a profile summary as JSON ({error!r} is missing "
            "or wrong)"
        ) from None
