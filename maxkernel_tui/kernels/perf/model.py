"""The TPU performance model of a Pallas kernel: estimated time, bound, share of the roofline,
and the speedup over XLA's time for the reference (perf/xla_model.py). No jax here; it reads
the static analysis (perf/analysis.py) and the TPU table.

The pipeline overlaps the transfer of the next step's blocks with this step's compute, so with
n steps moving I bytes in and O bytes out each, computing for C and paying the per-step
overhead S:
    time = dispatch + I/BW + (n - 1) * max(C + S, (I + O)/BW) + C + S + O/BW
(the prologue's first fetch and the epilogue's last write-back are not hidden). The terms, each
checked against the published measurements in perf/published.py (benchmarks/model_vs_published.py
prints the residuals):
  - dispatch: DISPATCH_S for the host to launch one jitted call, paid by XLA's reference too (the
    guide's 1024^3 matmuls, timed with timeit, take 120 us for 11 us of MXU work);
  - per-step overhead: STEP_OVERHEAD_S of scalar-core work per grid step (DMA issue, semaphore
    waits, index maps), serial with the step's compute while the DMA engines run beside it
    (the guide's 128-wide blocks: 0.35 us per step at 1024^3, 4096^3 and 8192^3 alike), plus
    DMA_ISSUE_S per DMA the body starts itself (an operand left in HBM, whose bytes count once);
  - MXU utilisation against block shape: a (m, k) @ (k, n) block runs at peak * m / (m +
    MXU_FILL_ROWS), times k and n over their padding to the MXU's width: each weight tile loaded
    into the systolic array costs the fill and drain of MXU_FILL_ROWS rows on top of the m rows
    streamed through it;
  - precision: bf16 operands take one MXU pass; f32 operands at Mosaic's default precision the
    target's `f32_default_passes` (one on v5e, where Mosaic rounds them to bf16:
    benchmarks/mosaic_f32_dot.py, 4096x8192x8192, 6.63 ms against 6.65 ms with bf16 operands and
    the same error; three elsewhere, fitted to JAXBench's v6e experts); HIGHEST_MXU_PASSES at
    Precision.HIGHEST (18.05 ms in the same v5e run); vector element operations and
    transcendentals run at the VPU's and EUP's rates (perf/vector_rates.py: measured on v5e),
    the three units side by side: a step takes the longest of its MXU, VPU and EUP work;
  - transfer: the step's share of HBM bytes at the chip's HBM bandwidth;
  - outside the kernels: the copies XLA makes around them (perf/outside.py) at the HBM bandwidth
    and XLA_EFFICIENCY, one after another with the kernels.
The calibration file (perf/calibration.py: TPU measurements beside these estimates) scales the
result per generation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from maxkernel_tui.codec import JsonData, Shape
from maxkernel_tui.kernels.perf.analysis import (
    Block,
    Bound,
    KernelAnalysis,
    MemorySpace,
    ReferenceCost,
)
from maxkernel_tui.kernels.perf.calibration import Calibration
from maxkernel_tui.kernels.perf.outside import OutsideTraffic
from maxkernel_tui.kernels.perf.vector_rates import vector_rates
from maxkernel_tui.kernels.perf.vs_xla import VsXla, XlaBaseline, XlaFigure
from maxkernel_tui.kernels.perf.xla_model import (
    XLA_DEFAULT,
    XLA_EFFICIENCY,
    XLA_PRECISIONS,
    XlaPrecision,
    relayout_seconds,
    xla_seconds,
)
from maxkernel_tui.kernels.report.basis import Basis
from maxkernel_tui.kernels.targets import TpuTarget

DISPATCH_S = 100e-6
STEP_OVERHEAD_S = 0.33e-6
# Scalar-core time to issue one DMA the body starts itself (descriptor, semaphore): paged
# attention (JAXBench's measured v6e expert, 1.02 ms, with its 512 DMA starts a step as counted:
# two conds of 256 each, both counted): fitted on that one measurement, not checked by it.
DMA_ISSUE_S = 6e-9
MXU_FILL_ROWS = 16
VMEM_WARN_SHARE = 0.75
TINY_STEP_BYTES = 64 * 1024  # below this per step, the per-step overhead dominates
HIGHEST_MXU_PASSES = 6.0


@dataclass
class Estimate(JsonData, shape=Shape(omit_none=("outside", "outside_seconds"))):
    target: str
    kind: Basis  # ESTIMATED, or CALIBRATED: scaled by TPU runs
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
    # XLA's time for the reference as it is written (perf/xla_model.py), dispatch in
    reference_seconds: float | None
    speedup: float | None  # reference_seconds / seconds: vs_xla's as_written
    dispatch_seconds: float = DISPATCH_S  # part of `seconds` and of `reference_seconds`
    reference_precision: str = XLA_DEFAULT.words  # what XLA's time was taken at
    # both speedups, as written and at the precision the tolerance needs (perf/vs_xla.py);
    # None in profiles stored before they were both kept
    vs_xla: VsXla | None = None
    # the copies XLA makes around the kernels (perf/outside.py): part of `seconds`, of
    # `transfer_seconds` and of `hbm_bytes`
    outside: OutsideTraffic | None = None
    outside_seconds: float | None = None

    @property
    def speedups(self) -> VsXla:
        """Both speedups over XLA; of a profile stored before both were kept, the one it had
        (against XLA as the reference is written, which sessions then compared with)."""
        if self.vs_xla is not None:
            return self.vs_xla
        passes = next(
            (p.passes for p in XLA_PRECISIONS.values() if p.words == self.reference_precision), 1
        )
        return VsXla(
            XlaFigure(XlaBaseline.AS_WRITTEN, passes, self.speedup, self.kind, self.target)
        )


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
    reference_precision: XlaPrecision = XLA_DEFAULT,
    tolerance_precision: XlaPrecision | None = None,
    outside: OutsideTraffic | None = None,
) -> Estimate:
    """The program's Pallas kernels run one after another, in one jitted call, with the copies
    XLA makes around them (`outside`); their times add up. The roofline is the task's: the
    reference's flops, and `io_bytes` (inputs read and
    outputs written once) or, without it, the bytes XLA's reference moves. The speedups are over
    XLA at `reference_precision` (the reference as written) and at `tolerance_precision` (what
    the task's tolerance needs; None: not known)."""
    factor = calibration.factor(target.name) if calibration else 1.0
    outside_bytes = outside.bytes if outside else 0
    outside_s = _outside_seconds(outside, target) if outside else 0.0
    kernels_s = sum(_pipeline_seconds(k, target) for k in kernels)
    seconds = (DISPATCH_S + kernels_s + outside_s) * factor
    transfer = sum(k.hbm_bytes / target.hbm_bandwidth for k in kernels) + outside_s
    compute = sum(_step_compute(k, target) * _steps(k) for k in kernels)
    overhead = sum(_step_overhead(k) * _steps(k) for k in kernels)
    parts: list[tuple[Bound, float]] = [
        (Bound.MEMORY, transfer),
        (Bound.COMPUTE, compute),
        (Bound.OVERHEAD, overhead),
    ]
    # the kernel nearest its VMEM limit says whether the program fits
    tightest = max(kernels, key=lambda k: k.vmem_bytes / vmem_limit(k, target), default=None)
    vmem = tightest.vmem_bytes if tightest else 0
    capacity = vmem_limit(tightest, target) if tightest else target.scoped_vmem_bytes
    roofline = _roofline(reference_cost, target, io_bytes)
    kind = Basis.CALIBRATED if factor != 1.0 else Basis.ESTIMATED
    written = _against(reference_cost, target, reference_precision, seconds, kind)
    tolerance = (
        None
        if tolerance_precision is None
        else _against(reference_cost, target, tolerance_precision, seconds, kind, tolerance=True)
    )
    xla = xla_seconds(reference_cost, target, reference_precision)
    reference_seconds = DISPATCH_S + xla if xla else None
    return Estimate(
        target=target.name,
        kind=kind,
        seconds=seconds,
        bound=max(parts, key=lambda part: part[1])[0],
        transfer_seconds=transfer,
        compute_seconds=compute,
        overhead_seconds=overhead,
        hbm_bytes=sum(k.hbm_bytes for k in kernels) + outside_bytes,
        flops=sum(k.mxu_flops_per_step * _steps(k) for k in kernels),
        vmem_bytes=vmem,
        vmem_capacity=capacity,
        fits_vmem=vmem <= capacity,
        roofline_seconds=roofline,
        roofline_share=roofline / seconds if roofline and seconds else None,
        reference_seconds=reference_seconds,
        speedup=written.speedup,
        reference_precision=reference_precision.words,
        vs_xla=VsXla(written, tolerance),
        outside=outside if outside and outside.copies else None,
        outside_seconds=outside_s * factor if outside and outside.copies else None,
    )


def vmem_limit(kernel: KernelAnalysis, target: TpuTarget) -> int:
    """The VMEM a kernel may use on `target`: the default scoped limit (16 MiB on v5e, 32 MiB on
    v6e), which Mosaic enforces at compile time, unless the kernel's compiler params raise it
    with `vmem_limit_bytes` (up to the chip's whole VMEM)."""
    if kernel.vmem_limit_bytes:
        return min(kernel.vmem_limit_bytes, target.vmem_bytes)
    return target.scoped_vmem_bytes


def _against(
    cost: ReferenceCost | None,
    target: TpuTarget,
    precision: XlaPrecision,
    seconds: float,
    kind: Basis,
    tolerance: bool = False,
) -> XlaFigure:
    """The kernel's speedup over XLA at `precision` (dispatch paid by both): XLA as the
    reference is written, or at the precision the `tolerance` needs."""
    xla = xla_seconds(cost, target, precision)
    ratio = (DISPATCH_S + xla) / seconds if xla and seconds else None
    baseline = XlaBaseline.TOLERANCE if tolerance else XlaBaseline.AS_WRITTEN
    return XlaFigure(baseline, precision.passes, ratio, kind, target.name)


def _steps(kernel: KernelAnalysis) -> int:
    return max(kernel.steps, 1)


def _pipeline_seconds(kernel: KernelAnalysis, target: TpuTarget) -> float:
    """One kernel's device time: the pipeline formula of the module docstring."""
    steps = _steps(kernel)
    moved_out = sum(b.bytes * b.fetches for b in kernel.blocks if b.is_output)
    step_in = (kernel.hbm_bytes - moved_out) / steps / target.hbm_bandwidth
    step_out = moved_out / steps / target.hbm_bandwidth
    step_compute = _step_compute(kernel, target)
    busy = step_compute + _step_overhead(kernel)
    return step_in + (steps - 1) * max(busy, step_in + step_out) + busy + step_out


def _step_overhead(kernel: KernelAnalysis) -> float:
    """The pipeline's per-step overhead and the DMAs the body issues itself."""
    return STEP_OVERHEAD_S + kernel.dma_starts_per_step * DMA_ISSUE_S


def _step_compute(kernel: KernelAnalysis, target: TpuTarget) -> float:
    peak = target.peak_bf16_flops * mxu_utilisation(kernel.matmul_dims, target.mxu)
    f32 = kernel.mxu_f32_flops_per_step - kernel.mxu_highest_flops_per_step
    bf16 = kernel.mxu_flops_per_step - kernel.mxu_f32_flops_per_step
    passes = (
        bf16
        + f32 * target.f32_default_passes
        + kernel.mxu_highest_flops_per_step * HIGHEST_MXU_PASSES
    )
    mxu = passes / peak
    vpu, eup = vector_rates(target)
    vector = kernel.vector_ops_per_step / vpu
    transcendental = kernel.transcendentals_per_step / eup
    return max(mxu, vector, transcendental)


def mxu_utilisation(dims: Sequence[Sequence[int]], mxu: tuple[int, int]) -> float:
    """The share of the MXU peak the body's matmuls reach, weighted by their flops: rows streamed
    over rows plus the fill and drain, and k and n over their padding to the MXU's width."""
    work = [m * k * n for m, k, n in dims]
    if not dims or not sum(work):
        return 1.0
    slowed = sum(
        w / _block_utilisation(m, k, n, mxu) for w, (m, k, n) in zip(work, dims, strict=True)
    )
    return sum(work) / slowed


def _block_utilisation(m: int, k: int, n: int, mxu: tuple[int, int]) -> float:
    if not (m and k and n):
        return 1.0
    padded_k, padded_n = -(-k // mxu[0]) * mxu[0], -(-n // mxu[1]) * mxu[1]
    return m / (m + MXU_FILL_ROWS) * (k / padded_k) * (n / padded_n)


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
    capacity = vmem_limit(kernel, target)
    footprint = f"VMEM footprint {kernel.vmem_bytes / 2**20:.1f} MiB"
    limit = (
        f"the {capacity / 2**20:.0f} MiB VMEM limit the kernel asks for on {target.name}"
        if kernel.vmem_limit_bytes
        else f"the {capacity / 2**20:.0f} MiB default scoped VMEM of {target.name}"
    )
    if kernel.vmem_bytes > capacity:
        raise_it = (
            ""
            if kernel.vmem_limit_bytes or capacity >= target.vmem_bytes
            else f" (raise vmem_limit_bytes, up to {target.vmem_bytes / 2**20:.0f} MiB)"
        )
        warnings.append(f"{footprint} exceeds {limit}: this tiling cannot compile{raise_it}")
    elif kernel.vmem_bytes > VMEM_WARN_SHARE * capacity:
        warnings.append(f"{footprint} is over {VMEM_WARN_SHARE:.0%} of {limit}")
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
    """A pipelined block with one of its last two dims neither a multiple of its tile (8 rows,
    128 lanes) nor the array's own, each dim judged alone as TPU lowering does: [256, 1] of
    [4096, 1] lowers (256 rows of 8, the array's one lane)."""
    if block.memory_space != MemorySpace.VMEM or block.is_scratch or len(block.shape) < 2:
        return False
    tiles = (8, 128)
    return any(
        size % tile and size != whole
        for size, tile, whole in zip(block.shape[-2:], tiles, block.array_shape[-2:], strict=True)
    )


def _tiling_warning(block: Block) -> str:
    return (
        f"{block.role} block {block.shape} of {block.array_shape}: one of its last two dims is "
        "neither a multiple of (8, 128) nor the array's own: the TPU cannot lower it"
    )


def _outside_seconds(outside: OutsideTraffic, target: TpuTarget) -> float:
    """XLA's copies around the kernels: those into another layout at their measured pace, the
    rest at the roofline of XLA's fusions."""
    read, written = outside.relayout_read, outside.relayout_written
    plain = (outside.bytes - read - written) / target.hbm_bandwidth / XLA_EFFICIENCY
    return plain + relayout_seconds(read, written, target)
