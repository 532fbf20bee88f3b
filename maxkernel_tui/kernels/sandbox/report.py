"""The sandbox in a report: the check every evaluation carries, saying which layers confined
the candidate, or that it ran without them. No jax here."""

from __future__ import annotations

from maxkernel_tui.kernels.report.checks import PASS, Check
from maxkernel_tui.kernels.sandbox.confine import Confinement, confinement

SANDBOX = "sandbox"


def sandbox_check() -> Check:
    """The layers in force where the candidate ran; plainly saying when it ran without some
    (the user opted out, else the worker would have refused to start) or without a policy."""
    state = confinement()
    data = _data(state)
    if not state.active and not state.missing:
        return Check(SANDBOX, PASS, "WITHOUT the sandbox: started with no policy", data=data)
    active = ", ".join(state.active) or "none"
    missing = state.lacks_required()
    if not missing:
        return Check(SANDBOX, PASS, f"the kernel ran confined: {active}", data=data)
    why = "; ".join(f"{layer}: {state.missing[layer]}" for layer in missing)
    return Check(
        SANDBOX, PASS, f"WITHOUT the sandbox (opted out): {why}; in force: {active}", data=data
    )


def _data(state: Confinement) -> dict[str, object]:
    return {
        "active": [str(layer) for layer in state.active],
        "missing": {str(layer): why for layer, why in state.missing.items()},
        "confined": bool(state.active) and not state.lacks_required(),
    }
