"""One figure: a kernel's speed beside its task's expert baseline, estimated or measured. Plain
data, no jax; evaluation/expert_comparison.py makes it, reports and `bench` show it."""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.codec import JsonData
from maxkernel_tui.kernels.report.basis import Basis

MATCHES_EXPERT = 0.95  # a kernel at or above this share of the expert's speed matches it
EXPERT_SPEEDUP = "speedup over the expert Pallas kernel"  # the measured Timing's `what`
# Whose block sizes the experts use: JAXBench's, tuned on v6e. On v5e the 1p and 8p tilings need
# more than its 16 MiB default scoped VMEM, so there they are estimated, not compiled.
EXPERT_TUNING = "JAXBench's tuning, made on TPU v6e"


@dataclass(frozen=True)
class ExpertComparison(JsonData):
    """The kernel's speed as a share of the expert's: expert time / kernel time (>1: faster)."""

    kind: Basis  # MEASURED or ESTIMATED
    where: str  # "v5e (performance model)" or the TPU that measured it
    expert: str  # the expert's file name
    kernel_s: float
    expert_s: float
    ratio: float
    ci95: tuple[float, float] | None = None  # measured only

    @property
    def label(self) -> str:
        interval = f" (95% CI {self.ci95[0]:.2f}-{self.ci95[1]:.2f})" if self.ci95 else ""
        return (
            f"{self.ratio:.2f}x of the expert{interval}: kernel {self.kernel_s * 1e3:.3f} ms, "
            f"expert {self.expert} ({EXPERT_TUNING}) {self.expert_s * 1e3:.3f} ms, {self.kind} "
            f"on {self.where}"
        )

    @property
    def matches(self) -> bool:
        return self.ratio >= MATCHES_EXPERT
