"""The sandbox in a report: the check every evaluation carries, saying which layers confined
the candidate, or that it ran without them. No jax here."""

from __future__ import annotations

from maxkernel_tui.kernels.report.checks import PASS, Check
from maxkernel_tui.kernels.report.reasons import Confinement, Reason
from maxkernel_tui.kernels.report.status import CheckName
from maxkernel_tui.kernels.sandbox.confine import confinement

SANDBOX = CheckName.SANDBOX


def sandbox_check() -> Check:
    """The layers in force where the candidate ran; plainly saying when it ran without some
    (the user opted out, else the worker would have refused to start) or without a policy."""
    state = confinement()
    missing = state.lacks_required()
    figures = Confinement(
        tuple(str(layer) for layer in state.active),
        tuple((str(layer), why) for layer, why in state.missing.items()),
        tuple(str(layer) for layer in missing),
        bool(state.active) and not missing,
    )
    if not state.active and not state.missing:
        return Check(SANDBOX, PASS, Reason.NO_SANDBOX_POLICY, figures)
    if not missing:
        return Check(SANDBOX, PASS, Reason.CONFINED, figures)
    return Check(SANDBOX, PASS, Reason.SANDBOX_LAYERS_MISSING, figures)
