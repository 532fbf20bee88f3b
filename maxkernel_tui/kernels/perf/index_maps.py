"""The block indices a `pallas_call`'s index maps give at every grid step. Imports jax.

An index map is a little integer program of the grid indices (`lambda i, j, k: (i, k)`,
`(i * 2 + j // 4, 0)`). It is evaluated here with NumPy over every grid step at once, with
XLA's integer semantics (division and remainder truncate toward zero, int32 wraps), so the
performance model's autotune does not compile an XLA program per block per candidate tiling
(that was most of the built-in planner's autotune on a CPU). A map that uses anything else
(floats, arrays, an integer division by zero) is evaluated by XLA as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.state.discharge import discharge_state

_ELEMENTWISE: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "not": np.invert,
}
_CALLS = ("pjit", "jit", "closed_call", "core_call")  # their body is evaluated inline


class _NotPlainIntegers(Exception):
    """The map does something this evaluator does not model: XLA evaluates it instead."""


def block_indices(
    closed: Any, points: np.ndarray, index_operands: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """The block index (one column per output of the map) at each grid point (one row per
    step, one column per grid axis, int32). `index_operands`: the scalar-prefetch arrays the
    map reads (as refs), when it takes any."""
    points = points.astype(np.int32)
    if index_operands:
        return _with_prefetch(closed, points, index_operands)
    try:
        return _with_numpy(closed, points)
    except _NotPlainIntegers:
        return _with_xla(closed, points)


def _with_prefetch(closed: Any, points: np.ndarray, operands: Sequence[np.ndarray]) -> np.ndarray:
    """Scalar-prefetch operands are refs in an index map: read as the arrays given."""
    discharged = discharge_state(closed)

    def index_of(point: jax.Array) -> jax.Array:
        ids = [point[i] for i in range(points.shape[1])]
        outs = jax.core.eval_jaxpr(discharged.jaxpr, discharged.consts, *ids, *operands)
        outs = outs[: len(closed.jaxpr.outvars)]  # a discharged map also returns its refs
        return jnp.stack([jnp.asarray(o, jnp.int32) for o in outs])

    return np.asarray(jax.jit(jax.vmap(index_of))(jnp.asarray(points)))


def _with_numpy(closed: Any, points: np.ndarray) -> np.ndarray:
    columns = [points[:, axis] for axis in range(points.shape[1])]
    outs = _evaluate(closed.jaxpr, closed.consts, columns)
    steps = points.shape[0]
    if not outs:
        return np.zeros((steps, 0), np.int32)
    return np.stack([np.broadcast_to(np.asarray(o).astype(np.int32), (steps,)) for o in outs], 1)


def _evaluate(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(var: Any) -> Any:
        return _integers(var.val, var.aval) if hasattr(var, "val") else env[var]

    env.update(zip(jaxpr.constvars, [_integers(c, None) for c in consts], strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        for out in eqn.outvars:
            _integers(None, out.aval)  # every value a scalar integer (or boolean) per step
        values = [read(v) for v in eqn.invars]
        env.update(zip(eqn.outvars, _apply(eqn, values), strict=True))
    return [read(v) for v in jaxpr.outvars]


def _apply(eqn: Any, values: list[Any]) -> list[Any]:
    name = eqn.primitive.name
    dtype = eqn.outvars[0].aval.dtype
    if name in _CALLS:
        body = eqn.params["jaxpr"] if "jaxpr" in eqn.params else eqn.params["call_jaxpr"]
        inner, consts = (body.jaxpr, body.consts) if hasattr(body, "consts") else (body, [])
        return _evaluate(inner, consts, values)
    if name in _ELEMENTWISE:
        result = _ELEMENTWISE[name](*values)
    elif name in ("div", "rem"):
        numerator, denominator = values
        if np.any(np.asarray(denominator) == 0):
            raise _NotPlainIntegers(name)
        result = _truncated_div(numerator, denominator) if name == "div" else np.fmod(*values)
    elif name == "select_n":
        which, *cases = values
        result = np.choose(np.asarray(which).astype(np.int32), np.broadcast_arrays(*cases))
    elif name == "clamp":
        low, value, high = values
        result = np.minimum(np.maximum(value, low), high)
    elif name == "integer_pow":
        result = np.power(values[0], eqn.params["y"])
    elif name == "convert_element_type":
        result = values[0]
    else:
        raise _NotPlainIntegers(name)
    return [np.asarray(result).astype(dtype)]


def _truncated_div(numerator: Any, denominator: Any) -> Any:
    """Integer division rounded toward zero, as XLA's (NumPy's // floors)."""
    quotient = np.abs(numerator) // np.abs(denominator)
    return np.where(
        (np.asarray(numerator) < 0) != (np.asarray(denominator) < 0), -quotient, quotient
    )


def _integers(value: Any, aval: Any) -> Any:
    """`value` as NumPy, when it is (and `aval` says) a scalar integer or boolean."""
    if aval is not None:
        dtype = np.dtype(aval.dtype)
        if getattr(aval, "shape", None) != () or not (
            np.issubdtype(dtype, np.integer) or dtype == np.bool_
        ):
            raise _NotPlainIntegers(str(aval))
    if value is None:
        return None
    array = np.asarray(value)
    if array.shape != () or not (np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
        raise _NotPlainIntegers(f"constant {value!r}")
    return array


def branch_shares(
    body: Any, points: np.ndarray, grid: Sequence[int], index_operands: Sequence[np.ndarray] = ()
) -> dict[int, np.ndarray]:
    """For each `cond` at the top level of a kernel body whose branch index is an integer
    program of the grid indices and of the scalar-prefetch values given in `index_operands`
    (`pl.when(kj * bk <= qi * bq)`, `pl.when(item < used_ref[0])`), the share of grid steps that
    take each of its branches, keyed by `id` of the equation. Whatever else the body computes
    (arrays, other refs, data) is skipped: a cond that reads it is left out."""
    env: dict[Any, Any] = {}
    shares: dict[int, np.ndarray] = {}
    # the body's first refs are the scalar-prefetch operands, known until the body writes one
    tables = dict(zip(body.invars[: len(index_operands)], index_operands, strict=True))

    def known(var: Any) -> bool:
        return hasattr(var, "val") or var in env

    def read(var: Any) -> Any:
        return _integers(var.val, var.aval) if hasattr(var, "val") else env[var]

    for eqn in body.eqns:
        name = eqn.primitive.name
        if name == "program_id":
            env[eqn.outvars[0]] = points[:, eqn.params["axis"]]
        elif name == "num_programs":
            env[eqn.outvars[0]] = np.int32(grid[eqn.params["axis"]])
        elif name == "get" and eqn.invars[0] in tables:
            if all(known(v) for v in eqn.invars[1:]):
                with contextlib.suppress(_NotPlainIntegers, KeyError, IndexError, ValueError):
                    value = _table_read(tables[eqn.invars[0]], [read(v) for v in eqn.invars[1:]])
                    env[eqn.outvars[0]] = _integers(value, eqn.outvars[0].aval)
        elif name == "swap" and eqn.invars[0] in tables:
            del tables[eqn.invars[0]]
        elif name == "cond":
            if known(eqn.invars[0]):
                with contextlib.suppress(_NotPlainIntegers, KeyError):
                    index = np.broadcast_to(read(eqn.invars[0]), (points.shape[0],))
                    branches = len(eqn.params["branches"])
                    counts = np.bincount(np.clip(index, 0, branches - 1), minlength=branches)
                    shares[id(eqn)] = counts / points.shape[0]
        elif all(known(v) for v in eqn.invars):
            with contextlib.suppress(_NotPlainIntegers, KeyError, ValueError):
                for out in eqn.outvars:
                    _integers(None, out.aval)
                env.update(
                    zip(eqn.outvars, _apply(eqn, [read(v) for v in eqn.invars]), strict=True)
                )
    return shares


def _table_read(table: np.ndarray, indices: list[Any]) -> Any:
    """A scalar read of a prefetched table at one index per dimension (per grid point), clamped
    into the table; anything else (slices, whole rows) is not a scalar read."""
    if len(indices) != table.ndim:
        raise _NotPlainIntegers("get")
    clipped = [np.clip(np.asarray(i), 0, n - 1) for i, n in zip(indices, table.shape, strict=True)]
    return table[tuple(np.broadcast_arrays(*clipped))] if clipped else table[()]


def _with_xla(closed: Any, points: np.ndarray) -> np.ndarray:
    axes = points.shape[1]

    def index_of(point: jax.Array) -> jax.Array:
        outs = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *[point[i] for i in range(axes)])
        return (
            jnp.stack([jnp.asarray(o, jnp.int32) for o in outs])
            if outs
            else jnp.zeros((0,), jnp.int32)
        )

    return np.asarray(jax.jit(jax.vmap(index_of))(jnp.asarray(points)))
