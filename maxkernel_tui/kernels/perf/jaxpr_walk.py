"""Walking a program's jaxpr: the jaxprs nested in an equation (jit, cond branches, scan and
while bodies, Pallas kernel bodies). Shared by the work rules (evaluation/work/) and the model
(perf/pallas_analysis.py). Imports jax."""

from __future__ import annotations

from typing import Any

from jax.extend import core


def sub_jaxprs(params: dict[str, Any]) -> list[Any]:
    """The jaxprs nested in an equation's parameters (jit, cond branches, scan and while bodies)."""
    found = []
    for value in params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, core.ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, core.Jaxpr):
                found.append(item)
    return found
