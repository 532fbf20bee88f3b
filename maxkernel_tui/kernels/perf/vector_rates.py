"""The TPU's vector units as the performance model sees them: element operations per second of
the VPU and of the EUP (transcendentals), per generation. No jax."""

from __future__ import annotations

from maxkernel_tui.kernels.targets import TARGETS, TpuTarget

# Measured on a v5e (benchmarks/mxu_rows.py, results/mxu_rows_v5e.json): a multiply and an add
# on a (512, 2048) f32 block held in VMEM take 0.455 us, 4.6e12 element operations a second; a
# tanh or an exp 0.687 us, 1.53e12 a second, and a multiply-add beside each tanh adds nothing
# (the VPU works while the EUP does: perf/model.py takes the larger of the two). As shares of
# v5e's bf16 MXU peak, assumed for generations not measured.
VPU_SHARE = 4.6e12 / TARGETS["v5e"].peak_bf16_flops
EUP_SHARE = 1.53e12 / TARGETS["v5e"].peak_bf16_flops
# Where a generation's shares are known to differ: v6e's MXU peak grew 4.7x over v5e's, its VPU
# 1.6x (the VPU share fitted to JAXBench's measured flash expert on v6e, which its softmax
# binds; splash, GQA and MLA land within 20% with it: benchmarks/model_vs_jaxbench.py; the EUP
# share binds none of them and is a guess).
VECTOR_SHARES: dict[str, tuple[float, float]] = {"v6e": (1 / 128, 1 / 256)}


def vector_rates(target: TpuTarget) -> tuple[float, float]:
    """Element operations per second of the VPU and of the EUP (transcendentals) on `target`."""
    vpu, eup = VECTOR_SHARES.get(target.name, (VPU_SHARE, EUP_SHARE))
    return target.peak_bf16_flops * vpu, target.peak_bf16_flops * eup
