"""The published TPU measurements the performance model is held to, and the kernels they timed as
the static analysis (perf/pallas_analysis.py) describes them, built directly. No jax here.

Sources (also in the shared VERIFIED.md, "Published measurements"):
  - jax's Pallas TPU matmul guide (docs, "Pallas TPU matmul"): v5e, bf16 operands, f32
    accumulator, share of the 197 TF/s peak, timed with `timeit` (host dispatch included);
  - jax issue #24633: jax's Pallas flash attention with its default 128 blocks on a v5e, bf16,
    7.3-7.6 TFLOP/s (the thread gives the rate per sequence length, not the batch and heads);
  - JAXBench's priority_kernels/RESULTS.md (aryatschand/JAXBench): TPU v6e-1, JAX 0.6.2, bf16,
    median of 100 timed calls after 5 warm-ups (perf_counter around a jitted call, so dispatch
    is included), jitted jnp baseline against the Pallas expert with block sizes tuned for v6e.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from maxkernel_tui.kernels.perf.analysis import Block, KernelAnalysis, MemorySpace, ReferenceCost

GUIDE = "jax Pallas TPU matmul guide (v5e, bf16, timeit)"
FLASH_ISSUE = "jax issue #24633 (v5e, bf16, Pallas flash attention, 128 blocks)"
V5E_PEAK = 197e12  # the share the guide reports is of this

Implementation = Literal["pallas", "xla"]


@dataclass(frozen=True)
class MatmulMeasurement:
    """One cell of the guide's table: an n x n x n bf16 matmul, Pallas with (bm, bk, bn) blocks or
    XLA's `jnp.matmul`, at `peak_share` of the v5e peak."""

    size: int
    implementation: Implementation
    blocks: tuple[int, int, int] | None  # (bm, bk, bn); None for XLA
    peak_share: float

    @property
    def flops(self) -> float:
        return 2.0 * self.size**3

    @property
    def seconds(self) -> float:
        return self.flops / (self.peak_share * V5E_PEAK)

    @property
    def label(self) -> str:
        what = "XLA jnp.matmul" if self.blocks is None else "Pallas bm={} bk={} bn={}"
        return f"{what.format(*self.blocks or ())} at {self.size}^3"


SMALL_BLOCKS = (128, 128, 128)
GUIDE_BLOCKS = (512, 1024, 1024)

_GUIDE_ROWS: tuple[tuple[Implementation, tuple[int, int, int] | None, tuple[float, ...]], ...] = (
    ("pallas", SMALL_BLOCKS, (0.037, 0.059, 0.061)),
    ("pallas", GUIDE_BLOCKS, (0.086, 0.785, 0.915)),
    ("xla", None, (0.091, 0.843, 0.923)),
)
MATMUL_GUIDE: tuple[MatmulMeasurement, ...] = tuple(
    MatmulMeasurement(size, kind, blocks, share)
    for kind, blocks, shares in _GUIDE_ROWS
    for size, share in zip((1024, 4096, 8192), shares, strict=True)
)

# The issue's figures per sequence length: (seq, milliseconds, TFLOP/s).
FLASH_ATTENTION_V5E: tuple[tuple[int, float, float], ...] = (
    (512, 2.36, 7.31),
    (1024, 9.49, 7.27),
    (2048, 37.61, 7.34),
    (4096, 144.97, 7.61),
)


@dataclass(frozen=True)
class JaxbenchMeasurement:
    """One row of JAXBench's table: the workload, the task of our suite it is, and both times."""

    key: str
    workload: str
    task: str
    xla_ms: float
    expert_ms: float

    @property
    def ratio(self) -> float:
        return self.xla_ms / self.expert_ms


JAXBENCH = "JAXBench priority_kernels/RESULTS.md (v6e-1, bf16, median of 100)"
JAXBENCH_V6E: tuple[JaxbenchMeasurement, ...] = (
    JaxbenchMeasurement("flash", "flash attention", "1p", 1.49, 0.62),
    JaxbenchMeasurement("splash", "splash attention", "4p", 1.50, 0.66),
    JaxbenchMeasurement("gqa", "GQA attention", "2p", 3.24, 1.44),
    JaxbenchMeasurement("paged", "paged attention", "6p", 1.96, 1.02),
    JaxbenchMeasurement("mla", "MLA attention", "3p", 4.48, 4.28),
    JaxbenchMeasurement("gemm", "dense GEMM", "8p", 5.48, 5.62),
)


def measured(
    size: int, implementation: Implementation, blocks: tuple[int, int, int] | None = None
) -> MatmulMeasurement:
    """The guide's measurement for one cell of its table (the table has every size and tiling
    above)."""
    return next(
        m
        for m in MATMUL_GUIDE
        if m.size == size and m.implementation == implementation and m.blocks == blocks
    )


def guide_matmul_analysis(size: int, blocks: tuple[int, int, int]) -> KernelAnalysis:
    """The guide's kernel for an n^3 bf16 matmul as the static analysis sees it: grid (n/bm,
    n/bn, n/bk) with depth last, x (bm, bk) and y (bk, bn) blocks, a bf16 (bm, bn) output block and
    an f32 accumulator zeroed at the first depth step, cast into the output at the last."""
    bm, bk, bn = blocks
    grid = [size // bm, size // bn, size // bk]
    steps = math.prod(grid)
    x_fetches = steps if grid[2] > 1 else grid[0]
    y_fetches = steps if grid[1] > 1 or grid[2] > 1 else 1
    out_fetches = grid[0] * grid[1]
    vmem = MemorySpace.VMEM
    blocks_ = [
        Block("input 0", [bm, bk], [size, size], "bfloat16", vmem, bm * bk * 2, x_fetches),
        Block("input 1", [bk, bn], [size, size], "bfloat16", vmem, bk * bn * 2, y_fetches),
        Block("output 0", [bm, bn], [size, size], "bfloat16", vmem, bm * bn * 2, out_fetches),
        Block("scratch 0", [bm, bn], [bm, bn], "float32", vmem, bm * bn * 4, 0),
    ]
    return KernelAnalysis(
        name="matmul_kernel",
        grid=grid,
        dimension_semantics=["parallel", "parallel", "arbitrary"],
        blocks=blocks_,
        scalar_prefetch=0,
        vmem_bytes=2 * (bm * bk + bk * bn + bm * bn) * 2 + bm * bn * 4,
        vmem_limit_bytes=None,
        hbm_bytes=sum(b.bytes * b.fetches for b in blocks_),
        steps=steps,
        mxu_flops_per_step=2.0 * bm * bk * bn,
        mxu_f32_flops_per_step=0.0,
        vector_ops_per_step=3.0 * bm * bn,  # zero, accumulate, cast (both branches counted)
        transcendentals_per_step=0.0,
        matmul_dims=[[bm, bk, bn]],
    )


def guide_matmul_reference(size: int) -> ReferenceCost:
    """XLA's cost of `jnp.matmul` of two n x n bf16 arrays as the model uses it: its flops, and
    (at least) every operand read and the result written once; the real cost analysis moves more
    bytes at 4096^3 (XLA's tiling reads an operand twice), which changes nothing while the MXU
    time is the longer."""
    return ReferenceCost(2.0 * size**3, 3.0 * size * size * 2)
