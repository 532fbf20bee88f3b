"""The TPU's vector units as the performance model sees them: element operations per second of
the VPU and of the EUP (transcendentals), per generation. No jax."""

from __future__ import annotations

from maxkernel_tui.kernels.targets import TpuTarget

# Rough shares of the bf16 MXU peak: vector element operations at 1/16, transcendentals at 1/64.
VPU_SHARE = 1 / 16
EUP_SHARE = 1 / 64
# The share of the MXU peak the VPU and EUP reach, where a generation's differs from the shares
# above: v6e's MXU peak grew 4.7x over v5e's while its vector units kept about v5e's rate per
# clock, so its share is a quarter of v5e's (checked against JAXBench's measured flash, splash
# and GQA experts on v6e: benchmarks/model_vs_jaxbench.py).
VECTOR_SHARES: dict[str, tuple[float, float]] = {"v6e": (1 / 96, 1 / 256)}


def vector_rates(target: TpuTarget) -> tuple[float, float]:
    """Element operations per second of the VPU and of the EUP (transcendentals) on `target`."""
    vpu, eup = VECTOR_SHARES.get(target.name, (VPU_SHARE, EUP_SHARE))
    return target.peak_bf16_flops * vpu, target.peak_bf16_flops * eup
