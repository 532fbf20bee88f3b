"""The built-in offline agent: writes Pallas TPU kernels from the structure of the reference's
jaxpr, with no model API.

    draft = draft_kernel(task)          # KernelDraft: source, family, tunables, estimate
    plan_task(task)                     # the plan alone; CannotPlan says why there is none
    provider.BuiltinProvider()          # the same agent behind the LLM provider interface

The drafting modules import jax: they run where evaluation workers run, never in the UI. So
this package imports them only when one of their names is used; `provider` and `errors` are
jax-free and can be imported anywhere.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "KernelDraft": "draft",
    "draft_kernel": "draft",
    "draft_candidates": "draft",
    "plan_task": "draft",
    "CannotPlan": "errors",
}

__all__ = ["CannotPlan", "KernelDraft", "draft_candidates", "draft_kernel", "plan_task"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
