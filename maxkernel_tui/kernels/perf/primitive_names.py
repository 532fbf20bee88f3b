"""Vocabularies of jaxpr primitive names shared by the model, the work rules and the built-in
agent. No jax here: the built-in agent's size rules read it without tracing anything."""

from __future__ import annotations

# Reductions over the axes named in their `axes` parameter: the result is the operand without
# those axes, and each result element reads the operand whole along them.
AXIS_REDUCTIONS = frozenset(
    {
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "reduce_prod",
        "reduce_and",
        "reduce_or",
        "argmax",
        "argmin",
    }
)
# Cumulative reductions along one axis: the result has the operand's shape.
CUMULATIVE_REDUCTIONS = frozenset({"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
# Every operation that reads all of its operand to reduce or order it: heavy work even without
# flops (evaluation/work/jaxpr_work.py counts the elements they read).
REDUCTIONS = AXIS_REDUCTIONS | CUMULATIVE_REDUCTIONS | frozenset({"sort", "top_k"})
