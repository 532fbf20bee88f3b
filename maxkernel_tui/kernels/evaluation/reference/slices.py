"""The reference's outputs over a few boxes of production shape, without computing the rest.
Imports jax.

The production tiles check compares only the output elements its sampled blocks decide: a few
blocks of a grid of hundreds. For references built from operations whose output regions map to
input regions (elementwise arithmetic, broadcasts, transposes, reductions, `dot_general`, `iota`,
and those of region_rules.py: reshapes, slices, pads, concatenations, cumulative sums, sorts,
gathers, convolutions), the region each intermediate value needs is followed backwards from an
output box (a matmul needs its contracted dimensions whole, its other dimensions only where the
box is), and the program is run forwards on those regions alone: for a 8192x8192x28672 GEMM and
eight 1024x1024 blocks, 3% of its flops, reading only the input rows and columns that meet the
box; a causal attention's scores only for the query rows in the box, and a grouped-query
attention's only for the heads in it. A box is a traced program (BoxProgram), so the reference
worker checks its budgets on the box's cost. Any other operation (scatters, loops...) raises
NotSliceable and the caller computes the whole reference instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core
from jax.extend.core import Var

from maxkernel_tui.kernels.evaluation.region_rules import (
    RULES,
    NotSliceable,
    Region,
    crop,
    dot_regions,
)
from maxkernel_tui.kernels.perf.primitive_names import AXIS_REDUCTIONS, CALL_BODIES

__all__ = ["BoxProgram", "NotSliceable", "Region", "box_program", "boxes", "output_in_box"]

# Operations whose every output element depends on the same element of each operand (an operand
# dimension of size 1 broadcasts).
_ELEMENTWISE = frozenset(
    [
        "abs",
        "acos",
        "acosh",
        "add",
        "and",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "cbrt",
        "ceil",
        "clamp",
        "convert_element_type",
        "copy",
        "copy_p",
        "cos",
        "cosh",
        "div",
        "eq",
        "erf",
        "erf_inv",
        "erfc",
        "exp",
        "exp2",
        "expm1",
        "floor",
        "ge",
        "gt",
        "imag",
        "integer_pow",
        "is_finite",
        "le",
        "lgamma",
        "digamma",
        "log",
        "log1p",
        "logistic",
        "lt",
        "max",
        "min",
        "mul",
        "ne",
        "neg",
        "nextafter",
        "not",
        "or",
        "pow",
        "real",
        "reduce_precision",
        "rem",
        "round",
        "rsqrt",
        "select_n",
        "sign",
        "sin",
        "sinh",
        "sqrt",
        "square",
        "stop_gradient",
        "sub",
        "tan",
        "tanh",
        "xor",
    ]
)


def boxes(indices: np.ndarray, shape: tuple[int, ...]) -> list[Region]:
    """Boxes that together hold every flat index of an array of `shape` (and perhaps more): along
    each dimension the set is cut where it begins or ends (an index whose neighbour along that
    dimension is not in it); a box is a cell between cuts, kept when an index falls in it. The
    sampled blocks of a grid come back one box each (or merged with a neighbour they touch),
    not as the product of their rows, columns and batches."""
    if not indices.size:
        return []
    if not shape:
        return [()]
    flat = _distinct(indices)
    # the indices as row segments: maximal runs of columns (the last dimension) in one row
    starts, stops = _runs(flat)
    width = shape[-1]
    first, last = starts // width, (stops - 1) // width
    rows = last - first + 1  # the rows a run crosses: one segment each
    row = np.repeat(first, rows) + _within(rows)
    a = np.maximum(np.repeat(starts, rows), row * width) - row * width
    b = np.minimum(np.repeat(stops, rows), (row + 1) * width) - row * width
    key = row * width + a
    prefix = np.unravel_index(row, shape[:-1]) if len(shape) > 1 else ()
    cuts: list[np.ndarray] = []
    cells = np.zeros(row.shape, np.int64)  # the cell of each segment's prefix, as one number
    for along, n, stride in zip(prefix, shape[:-1], _strides(shape[:-1]), strict=True):
        begins = ~_covered(row, a, b, key, width, row - stride, along > 0)
        ends = ~_covered(row, a, b, key, width, row + stride, along < n - 1)
        edges = np.unique(np.concatenate([along[begins], along[ends] + 1]))
        cuts.append(edges)
        cells = cells * len(edges) + np.searchsorted(edges, along, side="right") - 1
    edges = np.unique(np.concatenate([a, b]))  # along the last dimension: the segments' ends
    cuts.append(edges)
    low = np.searchsorted(edges, a, side="right") - 1
    high = np.searchsorted(edges, b - 1, side="right") - 1
    spanned = high - low + 1  # the cells of the last dimension a segment crosses
    code = np.repeat(cells * len(edges) + low, spanned) + _within(spanned)
    found = []
    for number in np.unique(code).tolist():  # a few boxes: decode each one's cells
        picked = []
        for edges in reversed(cuts):
            number, cell = divmod(number, len(edges))
            picked.append((int(edges[cell]), int(edges[cell + 1])))
        found.append(tuple(reversed(picked)))
    return found


def _within(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., count - 1 for each of `counts`, one after the other."""
    ranks: np.ndarray = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return ranks


def _strides(shape: tuple[int, ...]) -> list[int]:
    return [math.prod(shape[d + 1 :]) for d in range(len(shape))]


def _covered(
    row: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    key: np.ndarray,
    width: int,
    other: np.ndarray,
    inside: np.ndarray,
) -> np.ndarray:
    """Whether each segment's columns [a, b) are all held in row `other` (where `inside` the
    array): within one segment there, segments being maximal."""
    at = np.searchsorted(key, other * width + a, side="right") - 1
    found = np.maximum(at, 0)
    held: np.ndarray = inside & (at >= 0) & (row[found] == other) & (b[found] >= b)
    return held


def _distinct(values: np.ndarray) -> np.ndarray:
    """np.unique of sorted values without the sort (a sample's flat indices come sorted: a
    hashed unique of millions of them cost seconds)."""
    if (values[1:] > values[:-1]).all():
        return values
    return np.unique(values)


def _runs(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs of consecutive values of a sorted array without repeats: starts and stops."""
    breaks = np.flatnonzero(ordered[1:] != ordered[:-1] + 1) + 1
    starts = ordered[np.concatenate([[0], breaks])]
    stops = ordered[np.concatenate([breaks - 1, [len(ordered) - 1]])] + 1
    return starts, stops


@dataclass(frozen=True)
class BoxProgram:
    """One output of the reference over one box, as a program of the input regions it reads."""

    traced: Any  # a ClosedJaxpr, whose cost is the box's (the budgets are checked on it)
    regions: list[Region | None]  # per reference input: the region read, or None

    def run(self, inputs: Sequence[np.ndarray]) -> jax.Array:
        """The output over the box, from full inputs (NumPy arrays, perhaps memory-mapped: only
        the regions are read)."""
        held = [
            _Full(a).region(r) for a, r in zip(inputs, self.regions, strict=True) if r is not None
        ]
        found: jax.Array = jax.core.eval_jaxpr(self.traced.jaxpr, self.traced.consts, *held)[0]
        return found


def box_program(closed: Any, output: int, box: Region) -> BoxProgram:
    """Output `output` of the traced reference over `box`, as a program of what it reads."""
    jaxpr = closed.jaxpr
    wanted: list[Region | None] = [None] * len(jaxpr.outvars)
    wanted[output] = box
    regions = [_needs(jaxpr, wanted).get(v) for v in jaxpr.invars]
    specs = [
        jax.ShapeDtypeStruct(tuple(b - a for a, b in r), v.aval.dtype)
        for v, r in zip(jaxpr.invars, regions, strict=True)
        if r is not None
    ]

    def compute(*held: jax.Array) -> Any:
        given = iter(held)
        args = [None if r is None else _Held(next(given)) for r in regions]
        return _evaluate(jaxpr, list(closed.consts), args, wanted)[output]

    return BoxProgram(jax.make_jaxpr(compute)(*specs), regions)


def output_in_box(closed: Any, inputs: Sequence[np.ndarray], output: int, box: Region) -> jax.Array:
    """Output `output` of the traced reference over `box`, from full inputs (NumPy arrays, read
    only where the box needs them)."""
    return box_program(closed, output, box).run(inputs)


class _Full:
    """An input held whole (a NumPy array, perhaps memory-mapped): a region of it is read when
    a value needs it."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def region(self, region: Region) -> jax.Array:
        return jnp.asarray(self.array[tuple(slice(a, b) for a, b in region)])


def _evaluate(
    jaxpr: Any, consts: list[Any], args: list[Any], wanted: list[Region | None]
) -> list[Any]:
    """The jaxpr's wanted outputs over their regions; `args` and `consts` are whole values
    (`_Full` or arrays). Equations no wanted output depends on are not run."""
    need = _needs(jaxpr, wanted)
    env: dict[Any, tuple[Any, Region]] = {}
    for var, value in zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args], strict=True):
        if var in need:
            whole = value if isinstance(value, _Full) else _Full(np.asarray(value))
            env[var] = (whole.region(need[var]), need[var])

    def read(atom: Any, region: Region | None) -> Any:
        if isinstance(atom, core.Literal):
            return atom.val
        value, held = env[atom]
        return crop(value, held, region) if region is not None else value

    for eqn in jaxpr.eqns:
        outs = [need.get(v) if isinstance(v, Var) else None for v in eqn.outvars]
        if all(o is None for o in outs):
            continue
        regions = _operand_regions(eqn, outs)
        operands = [  # a call's operand its body does not use is not read
            None if r is None and isinstance(a, Var) else read(a, r)
            for a, r in zip(eqn.invars, regions, strict=True)
        ]
        for var, value, region in zip(eqn.outvars, _apply(eqn, operands, outs), outs, strict=True):
            if region is not None:
                env[var] = (value, region)
    return [
        None if region is None else read(var, region)
        for var, region in zip(jaxpr.outvars, wanted, strict=True)
    ]


def _needs(jaxpr: Any, wanted: list[Region | None]) -> dict[Any, Region]:
    """The region of each variable the wanted outputs depend on: the smallest box holding every
    use's region."""
    need: dict[Any, Region] = {}

    def widen(var: Any, region: Region | None) -> None:
        if region is None or not isinstance(var, Var):
            return
        held = need.get(var)
        need[var] = (
            region
            if held is None
            else tuple((min(a, c), max(b, d)) for (a, b), (c, d) in zip(held, region, strict=True))
        )

    for var, region in zip(jaxpr.outvars, wanted, strict=True):
        widen(var, region)
    for eqn in reversed(jaxpr.eqns):
        outs = [need.get(v) if isinstance(v, Var) else None for v in eqn.outvars]
        if any(o is not None for o in outs):
            for var, region in zip(eqn.invars, _operand_regions(eqn, outs), strict=True):
                widen(var, region)
    return need


def _operand_regions(eqn: Any, outs: list[Region | None]) -> list[Region | None]:
    """The region of each operand that the outputs' regions need."""
    name = eqn.primitive.name
    shapes = [tuple(getattr(v.aval, "shape", ())) for v in eqn.invars]
    if name in CALL_BODIES:
        body, _ = _body(eqn)
        need = _needs(body, outs)
        return [need.get(v) for v in body.invars]
    if name in RULES:
        return RULES[name][0](eqn, outs)
    if len(outs) != 1:
        raise NotSliceable(f"the reference uses {name} with {len(outs)} results")
    out = outs[0]
    assert out is not None
    if name == "iota":  # made from its indices alone (a causal mask's positions)
        return []
    if name in _ELEMENTWISE:
        return [_broadcast_region(shape, out) for shape in shapes]
    if name == "broadcast_in_dim":
        (shape, *rest) = shapes
        if rest:
            raise NotSliceable("a broadcast to a shape computed at run time")
        dims = eqn.params["broadcast_dimensions"]
        return [tuple((0, 1) if n == 1 else out[dims[d]] for d, n in enumerate(shape))]
    if name == "dot_general":
        return dot_regions(eqn.params["dimension_numbers"], shapes, out)
    if name == "transpose":
        permutation = eqn.params["permutation"]
        region: list[tuple[int, int]] = [(0, 0)] * len(permutation)
        for position, dim in enumerate(permutation):
            region[dim] = out[position]
        return [tuple(region)]
    if name in AXIS_REDUCTIONS:  # the reduced axes whole, the others where the box is
        axes = set(eqn.params["axes"])
        kept = iter(out)
        return [tuple((0, n) if d in axes else next(kept) for d, n in enumerate(shapes[0]))]
    if name == "squeeze":
        squeezed = set(eqn.params["dimensions"])
        kept = iter(out)
        return [tuple((0, 1) if d in squeezed else next(kept) for d in range(len(shapes[0])))]
    raise NotSliceable(f"the reference uses {name}")


def _broadcast_region(shape: tuple[int, ...], out: Region) -> Region:
    if not shape:
        return ()
    if len(shape) != len(out):
        raise NotSliceable("an elementwise operand of another rank")
    return tuple((0, 1) if n == 1 else r for n, r in zip(shape, out, strict=True))


def _apply(eqn: Any, operands: list[Any], outs: list[Region | None]) -> list[Any]:
    name = eqn.primitive.name
    if name in CALL_BODIES:
        body, consts = _body(eqn)
        return _evaluate(body, consts, [_Held(v) for v in operands], outs)
    forward = RULES.get(name, (None, None))[1]
    if forward is not None:
        return forward(eqn, operands, outs)
    params = dict(eqn.params)
    if name == "iota":
        out = outs[0]
        assert out is not None
        along = params["dimension"]
        shape = tuple(b - a for a, b in out)
        offset = jnp.asarray(out[along][0], params["dtype"])
        return [jax.lax.broadcasted_iota(params["dtype"], shape, along) + offset]
    if name == "broadcast_in_dim":
        out = outs[0]
        assert out is not None
        params["shape"] = tuple(b - a for a, b in out)
    with eqn.ctx.manager:
        result = eqn.primitive.bind(*operands, **params)
    return list(result) if eqn.primitive.multiple_results else [result]


def _body(eqn: Any) -> tuple[Any, list[Any]]:
    """A call's body and its constants (a checkpoint's body is an open jaxpr)."""
    body = eqn.params[CALL_BODIES[eqn.primitive.name]]
    if isinstance(body, core.ClosedJaxpr):
        return body.jaxpr, list(body.consts)
    return body, []


class _Held(_Full):
    """A call's operand, already cut to the region the call needs: its body reads it whole."""

    def region(self, region: Region) -> jax.Array:
        held: jax.Array = self.array
        return held
