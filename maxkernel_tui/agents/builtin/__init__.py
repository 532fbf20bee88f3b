"""The built-in offline agent: writes Pallas TPU kernels from the structure of the reference's
jaxpr, with no model API. Imports jax; it runs where evaluation workers run, never in the UI.

    draft = draft_kernel(task)          # KernelDraft: source, family, tunables, estimate
    plan_task(task)                     # the plan alone; CannotPlan says why there is none
"""

from maxkernel_tui.agents.builtin.draft import KernelDraft, draft_kernel, plan_task
from maxkernel_tui.agents.builtin.errors import CannotPlan

__all__ = ["CannotPlan", "KernelDraft", "draft_kernel", "plan_task"]
