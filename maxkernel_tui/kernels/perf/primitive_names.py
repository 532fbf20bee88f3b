"""Vocabularies of jaxpr primitive names shared by the model, the work rules and the built-in
agent. No jax here: the built-in agent's size rules read it without tracing anything."""

from __future__ import annotations

# Call primitives whose body is a jaxpr that runs as it is (not transformed), and the parameter
# holding it: walkers and evaluators of a program enter them as if the body were inlined.
CALL_BODIES = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "custom_vjp_call_jaxpr": "fun_jaxpr",
    "remat": "jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
}
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
