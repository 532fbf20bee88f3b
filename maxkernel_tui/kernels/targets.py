"""TPU generations: what we compile for ahead of time and what the performance model assumes.
Data only; no jax here.

Figures are per chip (one jax device), from Google Cloud's TPU system-architecture pages
(cloud.google.com/tpu/docs/v4, /v5e, /v5p, /v6e, /tpu7x), as read in 2026. VMEM capacities are
the ones libtpu reports in its "would exceed memory" compile errors (tests/kernels/perf confirms
them); the default scoped VMEM is what Mosaic lets a kernel use unless its compiler params raise
`vmem_limit_bytes` (16 MiB on v5e, 32 MiB on v6e: the shared VERIFIED.md; 16 MiB before v6e, 32
MiB from it, as jax's TPU docs give it); HBM sizes are the per-chip capacities (the compiler
keeps a little: v5e has 15.75 GiB of 16 usable).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class TpuTarget:
    name: str  # short name used on the command line and in listings
    topology: str  # argument of jax.experimental.topologies.get_topology_desc
    hbm_bytes: int
    generation: int  # newer generations are preferred among equal HBM sizes
    peak_bf16_flops: float = 0.0  # dense bf16 matmul flop/s
    hbm_bandwidth: float = 0.0  # bytes/s
    vmem_bytes: int = 0
    scoped_vmem_bytes: int = 16 * MIB  # a kernel's VMEM unless it asks for more
    mxu: tuple[int, int] = (128, 128)
    # MXU passes of an f32 matmul at Mosaic's default precision inside a kernel: one bf16 pass on
    # v5e (measured: benchmarks/mosaic_f32_dot.py); three elsewhere, what JAXBench's measured v6e
    # splash and GQA experts (an f32 p @ v each step) imply beside the model, not measured here.
    f32_default_passes: float = 3.0


TARGETS: dict[str, TpuTarget] = {
    t.name: t
    for t in (
        TpuTarget(
            "v5e",
            "v5e:2x2",
            16 * GIB,
            5,
            peak_bf16_flops=197e12,
            hbm_bandwidth=819e9,
            vmem_bytes=128 * MIB,
            mxu=(128, 128),
            f32_default_passes=1.0,
        ),
        TpuTarget(
            "v6e",
            "v6e:2x2",
            32 * GIB,
            6,
            peak_bf16_flops=918e12,
            hbm_bandwidth=1640e9,
            vmem_bytes=128 * MIB,
            scoped_vmem_bytes=32 * MIB,
            mxu=(256, 256),
        ),
        TpuTarget(
            "v4",
            "v4:2x2x1",
            32 * GIB,
            4,
            peak_bf16_flops=275e12,
            hbm_bandwidth=1228e9,
            vmem_bytes=16 * MIB,
            mxu=(128, 128),
        ),
        TpuTarget(
            "v5p",
            "v5p:2x2x1",
            95 * GIB,
            5,
            peak_bf16_flops=459e12,
            hbm_bandwidth=2765e9,
            vmem_bytes=64 * MIB,
            mxu=(128, 128),
        ),
        TpuTarget(
            "tpu7x",
            "tpu7x:2x2",
            192 * GIB,
            7,
            peak_bf16_flops=2307e12,
            hbm_bandwidth=7370e9,
            vmem_bytes=64 * MIB,
            scoped_vmem_bytes=32 * MIB,
            mxu=(256, 256),
        ),
    )
}

DEFAULT_TARGET = "v5e"


def fallback_chain(first: str = DEFAULT_TARGET) -> list[TpuTarget]:
    """`first`, then every generation with more HBM, smallest first (newest first among
    equals): where a reference does not fit, the listing says which generation holds it."""
    if first not in TARGETS:
        raise KeyError(f"unknown TPU target {first!r}; known: {', '.join(TARGETS)}")
    start = TARGETS[first]
    larger = sorted(
        (t for t in TARGETS.values() if t.hbm_bytes > start.hbm_bytes),
        key=lambda t: (t.hbm_bytes, -t.generation),
    )
    return [start, *larger]
