"""The trace check's rule on heavy work left to XLA around the Pallas kernels, against the
reference's own (the forward's and the backward's). No jax: it reads measured work."""

from __future__ import annotations

from maxkernel_tui.kernels.evaluation.work.jaxpr_work import Work
from maxkernel_tui.kernels.report.reasons import OutsidePallas

# Heavy work left to XLA outside the Pallas kernels, as a share of the reference's own.
XLA_FLOPS_SHARE = 0.05
XLA_REDUCED_SHARE = 0.10
XLA_FLOPS_FLOOR = 1e7  # tiny matmuls (index arithmetic, small projections) do not count
XLA_REDUCED_FLOOR = 1e6


def outside_pallas(work: Work, reference: Work) -> OutsidePallas | None:
    """The heavy work left to XLA beyond the reference's own, or None."""
    flops_budget = max(XLA_FLOPS_SHARE * reference.xla_flops, XLA_FLOPS_FLOOR)
    reduced_budget = max(XLA_REDUCED_SHARE * reference.xla_reduced, XLA_REDUCED_FLOOR)
    if work.xla_flops > flops_budget or work.xla_reduced > reduced_budget:
        return OutsidePallas(
            work.xla_flops,
            work.xla_reduced,
            reference.xla_flops,
            reference.xla_reduced,
            tuple(work.heavy_ops[:5]),
        )
    return None
