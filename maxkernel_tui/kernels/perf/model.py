"""The TPU performance model of a Pallas kernel: estimated time, bound, share of the roofline.
No jax here; it reads the static analysis (perf/analysis.py) and the TPU table.

The pipeline overlaps the transfer of the next step's blocks with this step's compute, so with
n steps moving I bytes in and O bytes out each and computing for C:
    time = I/BW + (n - 1) * max(C, (I + O)/BW) + C + O/BW + n * overhead
(the first fetch and the last write-back are not hidden; one step is bytes/BW + C + overhead).
Assumptions, all stated in the output:
  - transfer: the step's share of HBM bytes at the chip's HBM bandwidth;
  - compute: MXU flops at peak bf16 (f32 operands at 1/3: the MXU takes several bf16 passes),
    vector element operations at 1/16 and transcendentals at 1/64 of the bf16 peak (rough VPU
    and EUP rates); vector and transcendental work add up, MXU work overlaps them;
  - overhead: 0.35 us per grid step (pipeline bookkeeping and DMA issue).
The calibration file (perf/calibration.py: TPU measurements beside these estimates) scales the
result per generation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from maxkernel_tui.kernels.perf.analysis import Block, KernelAnalysis, ReferenceCost
from maxkernel_tui.kernels.perf.calibration import Calibration
from maxkernel_tui.kernels.targets import TpuTarget

STEP_OVERHEAD_S = 0.35e-6
VMEM_WARN_SHARE = 0.75
TINY_STEP_BYTES = 64 * 1024  # below this per step, the per-step overhead dominates
F32_MXU_SLOWDOWN = 3.0
VPU_SHARE = 1 / 16
EUP_SHARE = 1 / 64


Bound = Literal["memory", "compute", "overhead"]  # what takes the most time
EstimateKind = Literal["estimated", "estimated, calibrated"]  # the model, or it scaled by TPU runs


@dataclass
class Estimate:
    target: str
    kind: EstimateKind
    seconds: float
    bound: Bound
    transfer_seconds: float
    compute_seconds: float
    overhead_seconds: float
    hbm_bytes: int
    flops: float
    vmem_bytes: int
    vmem_capacity: int
    fits_vmem: bool
    roofline_seconds: float | None  # the task's own minimum on this TPU (reference flops and bytes)
    roofline_share: float | None  # roofline / estimated time
    reference_seconds: float | None  # XLA's optimal_seconds for the reference on this TPU
    speedup: float | None  # reference_seconds / seconds

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Estimate:
        return cls(**data)


def minimal_io_bytes(inputs: Any, outputs: Any) -> int:
    """The least any implementation must move: every input read once, every output written once.
    Takes anything with `.shape` and `.dtype` (jax.ShapeDtypeStruct)."""
    return sum(math.prod(s.shape) * s.dtype.itemsize for s in (*inputs, *outputs))


def estimate(
    kernels: Sequence[KernelAnalysis],
    target: TpuTarget,
    reference_cost: ReferenceCost | None = None,
    calibration: Calibration | None = None,
    io_bytes: int | None = None,
) -> Estimate:
    """The program's Pallas kernels run one after another; their times add up. The roofline is
    the task's: the reference's flops, and `io_bytes` (inputs read and outputs written once)
    or, without it, the bytes XLA's reference moves."""
    factor = calibration.factor(target.name) if calibration else 1.0
    seconds = sum(_pipeline_seconds(k, target) for k in kernels) * factor
    transfer = sum(k.hbm_bytes / target.hbm_bandwidth for k in kernels)
    compute = sum(_step_compute(k, target) * _steps(k) for k in kernels)
    overhead = sum(STEP_OVERHEAD_S * _steps(k) for k in kernels)
    parts: list[tuple[Bound, float]] = [
        ("memory", transfer),
        ("compute", compute),
        ("overhead", overhead),
    ]
    vmem = max((k.vmem_bytes for k in kernels), default=0)
    roofline = _roofline(reference_cost, target, io_bytes)
    reference_seconds = reference_cost.optimal_seconds if reference_cost else None
    return Estimate(
        target=target.name,
        kind="estimated, calibrated" if factor != 1.0 else "estimated",
        seconds=seconds,
        bound=max(parts, key=lambda part: part[1])[0],
        transfer_seconds=transfer,
        compute_seconds=compute,
        overhead_seconds=overhead,
        hbm_bytes=sum(k.hbm_bytes for k in kernels),
        flops=sum(k.mxu_flops_per_step * _steps(k) for k in kernels),
        vmem_bytes=vmem,
        vmem_capacity=target.vmem_bytes,
        fits_vmem=vmem <= target.vmem_bytes,
        roofline_seconds=roofline,
        roofline_share=roofline / seconds if roofline and seconds else None,
        reference_seconds=reference_seconds,
        speedup=reference_seconds / seconds if reference_seconds and seconds else None,
    )


def _steps(kernel: KernelAnalysis) -> int:
    return max(kernel.steps, 1)


def _pipeline_seconds(kernel: KernelAnalysis, target: TpuTarget) -> float:
    """One kernel's time: the pipeline formula of the module docstring."""
    steps = _steps(kernel)
    moved_out = sum(b.bytes * b.fetches for b in kernel.blocks if b.is_output)
    step_in = (kernel.hbm_bytes - moved_out) / steps / target.hbm_bandwidth
    step_out = moved_out / steps / target.hbm_bandwidth
    step_compute = _step_compute(kernel, target)
    return (
        step_in
        + (steps - 1) * max(step_compute, step_in + step_out)
        + step_compute
        + step_out
        + steps * STEP_OVERHEAD_S
    )


def _step_compute(kernel: KernelAnalysis, target: TpuTarget) -> float:
    peak = target.peak_bf16_flops
    bf16_flops = kernel.mxu_flops_per_step - kernel.mxu_f32_flops_per_step
    mxu = bf16_flops / peak + kernel.mxu_f32_flops_per_step * F32_MXU_SLOWDOWN / peak
    vector = kernel.vector_ops_per_step / (peak * VPU_SHARE)
    transcendental = kernel.transcendentals_per_step / (peak * EUP_SHARE)
    return max(mxu, vector + transcendental)


def _roofline(
    reference_cost: ReferenceCost | None, target: TpuTarget, io_bytes: int | None
) -> float | None:
    """max(flops / peak, bytes / bandwidth) of the task."""
    if reference_cost is None or reference_cost.flops is None:
        return None
    moved = io_bytes if io_bytes is not None else reference_cost.bytes_accessed
    if moved is None:
        return None
    return max(reference_cost.flops / target.peak_bf16_flops, moved / target.hbm_bandwidth)


def warnings_for(kernel: KernelAnalysis, target: TpuTarget) -> list[str]:
    """What a kernel engineer would want flagged before compiling, for this generation."""
    warnings = [_tiling_warning(b) for b in kernel.blocks if _untileable(b)]
    capacity = target.vmem_bytes
    footprint = f"VMEM footprint {kernel.vmem_bytes / 2**20:.1f} MiB"
    if kernel.vmem_bytes > capacity:
        warnings.append(
            f"{footprint} exceeds the {capacity / 2**20:.0f} "
            f"MiB of VMEM on {target.name}: this tiling cannot compile"
        )
    elif kernel.vmem_bytes > VMEM_WARN_SHARE * capacity:
        warnings.append(
            f"{footprint} is over {VMEM_WARN_SHARE:.0%} "
            f"of the {capacity / 2**20:.0f} MiB of VMEM on {target.name}"
        )
    for m, k, n in kernel.matmul_dims:
        if k % target.mxu[0] or n % target.mxu[1]:
            warnings.append(
                f"matmul ({m}x{k}) @ ({k}x{n}): K and N not multiples of the "
                f"{target.mxu[0]}x{target.mxu[1]} MXU of {target.name}"
            )
    moved_per_step = kernel.hbm_bytes / max(kernel.steps, 1)
    if kernel.steps > 64 and moved_per_step < TINY_STEP_BYTES:
        warnings.append(
            f"{kernel.steps} grid steps moving {moved_per_step / 1024:.1f} KiB each: per-step "
            "overhead dominates; use larger blocks"
        )
    if not kernel.index_maps_exact:
        warnings.append(
            "index maps depend on data (scalar prefetch) or the grid is huge: HBM bytes assume "
            "every block is fetched at every step (an upper bound)"
        )
    return list(dict.fromkeys(warnings))


def _untileable(block: Block) -> bool:
    """A pipelined block whose last two dims are neither multiples of (8, 128) nor the array's."""
    if block.memory_space != "vmem" or block.is_scratch or len(block.shape) < 2:
        return False
    rows, lanes = block.shape[-2:]
    return bool(rows % 8 or lanes % 128) and list(block.shape[-2:]) != list(block.array_shape[-2:])


def _tiling_warning(block: Block) -> str:
    return (
        f"{block.role} block {block.shape} of {block.array_shape}: last two dims "
        "neither multiples of (8, 128) nor the array's own: the TPU cannot lower it"
    )
