"""A kernel body's matmuls as a TPU computes them, for the interpreter.

Mosaic runs a matmul of f32 operands at its default precision as one bf16 MXU pass: the
operands rounded to bf16, the products summed in f32 (measured on a v5e,
benchmarks/mosaic_f32_dot.py: the same error as casting both operands to bf16, and the same
time). Interpret mode on a CPU computes that matmul in exact f32, so a kernel judged there
would be credited with numerics the TPU does not give it. Every kernel the judge interprets is
therefore rewritten first: each f32 operand of a `dot_general` at the default precision is
rounded to bf16, the product's dtype kept. Precision.HIGHEST is exact f32 on both sides and is
left alone; Mosaic refuses other precisions, so no kernel that compiles has one.

The rounding is a change of the operand's dtype, not a round trip through bf16, so no XLA
simplification can drop it. Imports jax: it runs in the judge's worker processes.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core as jax_core
from jax._src.lax import lax as jax_lax
from jax.extend import core


def interpreted_kernel(kernel: dict[str, Any], interpret: Any) -> dict[str, Any]:
    """A pallas_call's parameters for interpret mode (`interpret`: its InterpretParams), its
    body's matmuls rounded as the MXU rounds them."""
    return dict(kernel, interpret=interpret, jaxpr=as_on_mxu(kernel["jaxpr"]))


def as_on_mxu(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """The kernel body with every default-precision matmul's f32 operands rounded to bf16, in
    the jaxprs it holds too (loops, conditions, scoped scratch)."""
    return _MxuRounding().jaxpr(jaxpr)


def rounds_on_mxu(eqn: core.JaxprEqn) -> bool:
    """Whether the TPU rounds this equation's f32 operands to bf16: a dot_general at the
    default precision (None, or DEFAULT for both operands)."""
    if eqn.primitive.name != "dot_general":
        return False
    precision = eqn.params.get("precision")
    if precision is None:
        return True
    return isinstance(precision, tuple) and all(
        p in (None, jax.lax.Precision.DEFAULT) for p in precision
    )


class _MxuRounding:
    def __init__(self) -> None:
        self._done: dict[int, Any] = {}  # a jaxpr shared by several equations: rewritten once

    def jaxpr(self, jaxpr: core.Jaxpr) -> core.Jaxpr:
        key = id(jaxpr)
        if key not in self._done:
            self._done[key] = (jaxpr, self._rewrite(jaxpr))
        done: core.Jaxpr = self._done[key][1]
        return done

    def _rewrite(self, jaxpr: core.Jaxpr) -> core.Jaxpr:
        eqns: list[core.JaxprEqn] = []
        for eqn in jaxpr.eqns:
            params = {k: self._value(v) for k, v in eqn.params.items()}
            if rounds_on_mxu(eqn) and any(_is_f32(a) for a in eqn.invars):
                invars = [_to_bf16(a, eqn, eqns) if _is_f32(a) else a for a in eqn.invars]
                result: Any = eqn.outvars[0].aval
                params["preferred_element_type"] = result.dtype  # what the f32 operands gave
                eqns.append(eqn.replace(invars=invars, params=params))
            elif any(params[k] is not eqn.params[k] for k in params):
                eqns.append(eqn.replace(params=params))
            else:
                eqns.append(eqn)
        rewritten: core.Jaxpr = jaxpr.replace(eqns=eqns)
        return rewritten

    def _value(self, value: Any) -> Any:
        if isinstance(value, core.ClosedJaxpr):
            return core.ClosedJaxpr(self.jaxpr(value.jaxpr), value.consts)
        if isinstance(value, core.Jaxpr):
            return self.jaxpr(value)
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            items = [self._value(v) for v in value]
            same = all(a is b for a, b in zip(items, value, strict=True))
            return value if same else type(value)(items)
        return value


def _is_f32(atom: Any) -> bool:
    aval = getattr(atom, "aval", None)
    return aval is not None and np.dtype(getattr(aval, "dtype", np.int8)) == np.float32


def _to_bf16(atom: Any, at: core.JaxprEqn, eqns: list[core.JaxprEqn]) -> Any:
    """A bf16 copy of an f32 operand, its conversion appended to `eqns`."""
    aval = atom.aval.update(dtype=jnp.bfloat16, weak_type=False)
    rounded = core.Var(aval)
    params = {"new_dtype": jnp.dtype(jnp.bfloat16), "weak_type": False, "sharding": None}
    eqns.append(
        jax_core.new_jaxpr_eqn(
            [atom], [rounded], jax_lax.convert_element_type_p, params, set(), at.source_info
        )
    )
    return rounded
