"""XLA's own time for the reference, as the performance model compares a kernel with it. No jax.

XLA's cost analysis (compiled ahead of time for the generation) counts the reference's flops and
the HBM bytes its compiled program moves; its `optimal_seconds` is not used, because against the
Pallas matmul guide's measurements on v5e it is 26% above the MXU time at 4096^3 and exactly the
MXU time at 8192^3, while XLA ran at 97% and 94% of the peak there. The model instead takes:
    time = (sum over matmuls of max(flops_i * passes / peak, streamed_i / bandwidth)
            + max(rest_flops * passes / peak, rest_bytes / bandwidth)
            + transcendentals * XLA_OPS_PER_TRANSCENDENTAL / fitted_rate) / XLA_EFFICIENCY
with `passes` the bf16 MXU passes of the precision compared at (1 at XLA's default precision on
a TPU; 6 at Precision.HIGHEST, which the cost analysis does not tell apart: its counts are the
same at every precision). The second term is the vector work of XLA's softmaxes and other
transcendental-heavy fusions (the exponential, the row max and sum across lanes, the casts, in
fusions of their own that do not overlap the matmuls): JAXBench's jitted attention baselines on
v6e took twice the time of their matmuls and HBM traffic (benchmarks/model_vs_jaxbench.py).
XLA runs a program as fusions one after another, and each matmul is a fusion of its own: it hides
its own operand traffic under its MXU work (or the reverse), not another fusion's, so the matmuls
(counted from the jaxpr, perf/pallas_analysis.matmul_traffic: `streamed_i` includes the re-reads
of an operand XLA broadcast into the dot, which the cost analysis counts once) add up each at its
own bound, and the rest of the program (transposes, pads, softmax passes, convolutions: the cost
analysis's flops and bytes less the matmuls') at its own. Checked on JAXBench's MLA (projections
at the MXU's pace beside 1.7 GB of layout traffic) and paged attention (key heads repeated 8x into
one-row matmuls: 3.57 ms measured on a v5e, 3.65 ms estimated; 1.1 ms from the cost analysis's
bytes alone): benchmarks/model_vs_jaxbench.py. Without the matmuls (a stored cost from before),
the program is taken as one fusion. The program's copies into another layout
(ReferenceCost.relayouts, from the compiled HLO) are taken out of the rest and timed as
`relayout_seconds` says: on a v5e they read at 40% of the bandwidth, measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.kernels.perf.analysis import ReferenceCost
from maxkernel_tui.kernels.targets import TpuTarget

# XLA's fused programs reach this share of the roofline of their own flops and bytes: the guide
# measured its bf16 matmul at 84.3% and 92.3% of the v5e peak at 4096^3 and 8192^3 with host
# dispatch included, about 95% without.
XLA_EFFICIENCY = 0.95
# VPU element operations per transcendental element in XLA's fusions around it (fitted to
# JAXBench's flash, splash, GQA and MLA baselines on v6e: 1.49, 1.50, 3.24, 4.48 ms), at the
# rate it was fitted with: a share of the bf16 peak (v6e's, and 1/16 elsewhere, which the v5e
# references measured since hold: measured/estimated 1.02x over 28 tasks). A fitted proxy of
# XLA's fusions, not the VPU's rate (perf/vector_rates.py has that).
XLA_OPS_PER_TRANSCENDENTAL = 27.0
XLA_VECTOR_SHARE = 1 / 16
XLA_VECTOR_SHARES = {"v6e": 1 / 96}
# A copy into another layout (a transpose, a cast fused into one) reads at this share of the HBM
# bandwidth, its writes hidden under the reads; measured on a v5e by device trace, every such
# copy of six references and one kernel (benchmarks/results/conv_relayout_kernel.md): 18k's and
# 22k's images f32 into bf16 (height, width, channels, batch), 537 MB read in 1.581 and 1.635
# ms; 34k's and 39k's, 268 MB in 0.805 and 0.822 ms; 17p's bf16 (1536, 1536, 128) transposed,
# 604 MB in 1.942 ms; 34k's kernel output f32 into XLA's layout, 520 MB in 1.590 ms: 311 to 340
# GB/s of the 819. Generations not measured keep the roofline.
RELAYOUT_READ_SHARES = {"v5e": 0.40}


@dataclass(frozen=True)
class XlaPrecision:
    """The precision XLA's reference is compared at, and why."""

    passes: int  # bf16 MXU passes per matmul
    words: str  # e.g. "XLA at its default precision (one bf16 pass)"


XLA_DEFAULT = XlaPrecision(1, "XLA at its default precision (one bf16 MXU pass)")
XLA_HIGH = XlaPrecision(
    3, "XLA at Precision.HIGH (three bf16 MXU passes): the task's tolerance needs f32 matmuls"
)
XLA_HIGHEST = XlaPrecision(
    6, "XLA at Precision.HIGHEST (six bf16 MXU passes): the task asks for full f32 matmuls"
)


XLA_PRECISIONS = {p.passes: p for p in (XLA_DEFAULT, XLA_HIGH, XLA_HIGHEST)}


def xla_seconds(
    cost: ReferenceCost | None, target: TpuTarget, precision: XlaPrecision = XLA_DEFAULT
) -> float | None:
    """XLA's device time for the reference on `target` (the module docstring's formula); XLA's
    own optimal_seconds when the cost has no flops or bytes; None without a cost."""
    if cost is None:
        return None
    if cost.flops is None or cost.bytes_accessed is None:
        return cost.optimal_seconds
    peak = target.peak_bf16_flops / precision.passes
    matmuls = cost.matmuls or []
    # What a fusion moves of what the cost analysis counts cannot exceed the program's count: a
    # convolution whose consumers XLA fuses into it (39k's global mean) writes no output.
    alone = sum(
        max(
            flops / (peak * _mxu_share(m)),
            (min(counted, cost.bytes_accessed) + streamed - counted) / target.hbm_bandwidth,
        )
        for flops, streamed, counted, *m in matmuls
    )
    read, written = cost.relayouts or (0, 0)
    rest_flops = max(cost.flops - sum(m[0] for m in matmuls), 0.0)
    rest_bytes = max(cost.bytes_accessed - sum(m[2] for m in matmuls) - read - written, 0.0)
    rest = max(rest_flops / peak, rest_bytes / target.hbm_bandwidth)
    fitted_rate = target.peak_bf16_flops * XLA_VECTOR_SHARES.get(target.name, XLA_VECTOR_SHARE)
    vector = (cost.transcendentals or 0.0) * XLA_OPS_PER_TRANSCENDENTAL / fitted_rate
    return (alone + rest + vector) / XLA_EFFICIENCY + relayout_seconds(read, written, target)


def relayout_seconds(read: float, written: float, target: TpuTarget) -> float:
    """The time of copies into another layout that read `read` and write `written` bytes: at
    the measured read share where the generation has one (RELAYOUT_READ_SHARES), else at the
    roofline of XLA's fusions."""
    plain = (read + written) / target.hbm_bandwidth / XLA_EFFICIENCY
    share = RELAYOUT_READ_SHARES.get(target.name)
    return plain if share is None else max(plain, read / (share * target.hbm_bandwidth))


def _mxu_share(rest: list[float]) -> float:
    """The share of the MXU's peak XLA reaches on one matmul or convolution (after its bytes:
    perf/pallas_analysis.matmul_traffic); 1 for a matmul stored before the share was."""
    return rest[0] if rest else 1.0
