"""How the region of an operation's results maps back to its operands' regions, and how the
results are then made from those regions alone, for the operations that change shapes or read
along an axis, and for dot_general (evaluation/reference/slices.py follows the reference with
them; tiles/pullback.py the candidate's XLA between its kernels). Imports jax.

Each rule's operand regions hold at least what the results' regions need (a bounding box, or an
operand whole along an axis, where the exact set is not a box); the forward step is handed each
operand cut to exactly the region its rule asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.extend.core import Var

from maxkernel_tui.kernels.perf.primitive_names import CUMULATIVE_REDUCTIONS

# (start, stop) per dimension
Region = tuple[tuple[int, int], ...]
Regions = list[Region | None]


class NotSliceable(Exception):
    """The reference has an operation whose regions this module does not follow."""


def _shapes(eqn: Any) -> list[tuple[int, ...]]:
    return [tuple(getattr(v.aval, "shape", ())) for v in eqn.invars]


def _size(region: Region) -> tuple[int, ...]:
    return tuple(b - a for a, b in region)


def crop(value: Any, held: Region, region: Region) -> Any:
    """The part of `value` (which holds `held`) inside `region`."""
    if held == region:
        return value
    starts = [a - h for (a, _), (h, _) in zip(region, held, strict=True)]
    limits = [b - h for (_, b), (h, _) in zip(region, held, strict=True)]
    return jax.lax.slice(value, starts, limits)


# --- reshape: dimensions grouped where their sizes' products agree; within a group the region
# is a run of row-major positions, widened to a box that is itself one run (leading dimensions
# single, one dimension a range, the trailing ones whole), so that it reshapes as it is.


def _groups(source: tuple[int, ...], target: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """The dimensions of `source` and `target` (size-1 ones left out) in consecutive groups of
    equal size."""
    if 0 in source or 0 in target:
        raise NotSliceable("a reshape of an empty array")
    left = [d for d, n in enumerate(source) if n != 1]
    right = [d for d, n in enumerate(target) if n != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(left):
        dims_a, dims_b = [left[i]], [right[j]]
        size_a, size_b = source[left[i]], target[right[j]]
        i, j = i + 1, j + 1
        while size_a != size_b:
            if size_a < size_b:
                dims_a.append(left[i])
                size_a, i = size_a * source[left[i]], i + 1
            else:
                dims_b.append(right[j])
                size_b, j = size_b * target[right[j]], j + 1
        groups.append((dims_a, dims_b))
    return groups


def _one_run(ranges: list[tuple[int, int]], sizes: list[int]) -> list[tuple[int, int]]:
    """The smallest box holding `ranges` whose positions are consecutive in row-major order."""
    found, opened = [], False
    for (a, b), n in zip(ranges, sizes, strict=True):
        found.append((0, n) if opened else (a, b))
        opened = opened or b - a > 1
    return found


def _run(ranges: list[tuple[int, int]], sizes: list[int]) -> tuple[int, int]:
    """The row-major positions [first, last + 1) of a box that is one run."""
    first = np.ravel_multi_index([a for a, _ in ranges], sizes) if sizes else 0
    last = np.ravel_multi_index([b - 1 for _, b in ranges], sizes) if sizes else 0
    return int(first), int(last) + 1


def _run_box(run: tuple[int, int], sizes: list[int]) -> list[tuple[int, int]]:
    """The smallest one-run box holding the positions [start, stop)."""
    first = np.unravel_index(run[0], sizes)
    last = np.unravel_index(run[1] - 1, sizes)
    return _one_run([(int(a), int(b) + 1) for a, b in zip(first, last, strict=True)], sizes)


def _reshape_plan(eqn: Any, out: Region) -> list[tuple[list[int], list[int], Any, Any]]:
    """Per group: the source dimensions, the target ones, the source region and the one-run box
    of the target around `out`, each in the group's dimensions."""
    if eqn.params.get("dimensions") is not None:
        raise NotSliceable("a reshape that transposes")
    (source,) = _shapes(eqn)
    target = tuple(eqn.outvars[0].aval.shape)
    plan = []
    for dims_a, dims_b in _groups(source, target):
        sizes_b = [target[d] for d in dims_b]
        box_b = _one_run([out[d] for d in dims_b], sizes_b)
        box_a = _run_box(_run(box_b, sizes_b), [source[d] for d in dims_a])
        plan.append((dims_a, dims_b, box_a, box_b))
    return plan


def _reshape_back(eqn: Any, outs: Regions) -> Regions:
    (out,) = outs
    assert out is not None
    (source,) = _shapes(eqn)
    region = [(0, 1)] * len(source)
    for dims_a, _, box_a, _ in _reshape_plan(eqn, out):
        for d, r in zip(dims_a, box_a, strict=True):
            region[d] = r
    return [tuple(region)]


def _reshape_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    (out,) = outs
    assert out is not None
    (source,) = _shapes(eqn)
    target = tuple(eqn.outvars[0].aval.shape)
    plan = _reshape_plan(eqn, out)
    value = operands[0]
    # each group's source region as its run of positions, cut to the target box's run
    value = value.reshape([math.prod(_size(tuple(a))) for _, _, a, _ in plan])
    starts, limits = [], []
    for dims_a, dims_b, box_a, box_b in plan:
        held = _run(box_a, [source[d] for d in dims_a])
        wanted = _run(box_b, [target[d] for d in dims_b])
        starts.append(wanted[0] - held[0])
        limits.append(wanted[1] - held[0])
    value = jax.lax.slice(value, starts, limits)
    value = value.reshape([b - a for _, _, _, box in plan for a, b in box])
    held_b = tuple(r for _, _, _, box in plan for r in box)
    kept = tuple(out[d] for _, dims_b, _, _ in plan for d in dims_b)
    return [crop(value, held_b, kept).reshape(_size(out))]


# --- one dimension at a time


def _slice_back(eqn: Any, outs: Regions) -> Regions:
    (out,) = outs
    assert out is not None
    strides = eqn.params["strides"] or (1,) * len(out)
    starts = eqn.params["start_indices"]
    return [
        tuple(
            (s + a * t, s + (b - 1) * t + 1)
            for (a, b), s, t in zip(out, starts, strides, strict=True)
        )
    ]


def _slice_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    value = operands[0]
    strides = eqn.params["strides"] or (1,) * value.ndim
    return [jax.lax.slice(value, (0,) * value.ndim, value.shape, strides)]


def _pad_spans(eqn: Any, out: Region) -> list[tuple[int, int]]:
    """The operand positions whose padded positions fall in `out`, per dimension."""
    (shape, _) = _shapes(eqn)
    spans = []
    for (a, b), n, (low, _, interior) in zip(out, shape, eqn.params["padding_config"], strict=True):
        step = interior + 1
        first = min(max(0, -((low - a) // step)), n)  # ceil((a - low) / step), within [0, n]
        last = min(max(first, (b - 1 - low) // step + 1), n)
        spans.append((first, max(first, last)))
    return spans


def _pad_back(eqn: Any, outs: Regions) -> Regions:
    (out,) = outs
    assert out is not None
    return [tuple(_pad_spans(eqn, out)), ()]


def _pad_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    (out,) = outs
    assert out is not None
    config = []
    for (a, b), (first, last), (low, _, interior) in zip(
        out, _pad_spans(eqn, out), eqn.params["padding_config"], strict=True
    ):
        if first == last:  # only padding in the box
            config.append((b - a, 0, 0))
        else:
            step = interior + 1
            config.append((low + first * step - a, b - 1 - low - (last - 1) * step, interior))
    return [jax.lax.pad(operands[0], operands[1], config)]


def _concatenate_back(eqn: Any, outs: Regions) -> Regions:
    (out,) = outs
    assert out is not None
    axis = eqn.params["dimension"]
    regions: Regions = []
    offset = 0
    for atom, shape in zip(eqn.invars, _shapes(eqn), strict=True):
        if not isinstance(atom, Var):
            raise NotSliceable("a concatenation of constants")
        a, b = max(out[axis][0], offset), min(out[axis][1], offset + shape[axis])
        region = list(out)
        region[axis] = (a - offset, b - offset)
        regions.append(tuple(region) if a < b else None)
        offset += shape[axis]
    return regions


def _concatenate_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    present = [value for value in operands if value is not None]
    return [jax.lax.concatenate(present, eqn.params["dimension"])]


def _split_back(eqn: Any, outs: Regions) -> Regions:
    axis = eqn.params["axis"]
    offsets = np.cumsum([0, *eqn.params["sizes"]]).tolist()
    mapped = []
    for out, offset in zip(outs, offsets, strict=False):
        if out is not None:
            region = list(out)
            region[axis] = (out[axis][0] + offset, out[axis][1] + offset)
            mapped.append(region)
    return [_bounding(mapped)]


def _split_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    (held,) = _split_back(eqn, outs)
    assert held is not None
    axis = eqn.params["axis"]
    offsets = np.cumsum([0, *eqn.params["sizes"]]).tolist()
    found: list[Any] = []
    for out, offset in zip(outs, offsets, strict=False):
        if out is None:
            found.append(None)
            continue
        region = list(out)
        region[axis] = (out[axis][0] + offset, out[axis][1] + offset)
        found.append(crop(operands[0], held, tuple(region)))
    return found


def _bounding(regions: list[Any]) -> Region:
    return tuple(
        (min(r[0] for r in rs), max(r[1] for r in rs)) for rs in zip(*regions, strict=True)
    )


def _rev_back(eqn: Any, outs: Regions) -> Regions:
    (out,) = outs
    assert out is not None
    (shape,) = _shapes(eqn)
    flipped = set(eqn.params["dimensions"])
    return [
        tuple(
            (n - b, n - a) if d in flipped else (a, b)
            for d, ((a, b), n) in enumerate(zip(out, shape, strict=True))
        )
    ]


def _cumulative_back(eqn: Any, outs: Regions) -> Regions:
    """Each result depends on the operand up to it along the axis (from it, reversed)."""
    (out,) = outs
    assert out is not None
    (shape,) = _shapes(eqn)
    axis, region = eqn.params["axis"], list(out)
    a, b = out[axis]
    region[axis] = (a, shape[axis]) if eqn.params["reverse"] else (0, b)
    return [tuple(region)]


def _cumulative_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    (out,) = outs
    assert out is not None
    (held,) = _cumulative_back(eqn, outs)
    assert held is not None
    with eqn.ctx.manager:
        value = eqn.primitive.bind(operands[0], **eqn.params)
    return [crop(value, held, out)]


# --- an axis read whole (sort, top_k): every result over the box the needed ones share


def _axis_of(eqn: Any) -> int:
    return int(eqn.params["dimension"] if eqn.primitive.name == "sort" else eqn.params["axis"])


def _whole_axis_back(eqn: Any, outs: Regions) -> Regions:
    axis = _axis_of(eqn) % len(_shapes(eqn)[0])
    shared = list(_bounding([o for o in outs if o is not None]))
    regions: Regions = []
    for shape in _shapes(eqn):
        shared[axis] = (0, shape[axis])
        regions.append(tuple(shared))
    return regions


def _whole_axis_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    axis = _axis_of(eqn) % len(_shapes(eqn)[0])
    with eqn.ctx.manager:
        found = eqn.primitive.bind(*operands, **eqn.params)
    shared = list(_bounding([o for o in outs if o is not None]))
    shared[axis] = (0, int(eqn.outvars[0].aval.shape[axis]))
    return [
        None if out is None else crop(value, tuple(shared), out)
        for value, out in zip(found, outs, strict=True)
    ]


# --- convolution: an output window reads the input positions under it (the input features whole,
# the kernel's spatial extent whole); grouped convolutions keep their grouped dimension whole.


def _conv_plan(eqn: Any, out: Region) -> tuple[Region, Region, Region, Region]:
    """The input's and the kernel's regions, the output region the convolution of those makes
    (`out` widened where a dimension is computed whole), and the padding of each spatial
    dimension that convolving the input's region needs (what lies outside it, low and high)."""
    params = eqn.params
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    lhs_shape, rhs_shape = _shapes(eqn)
    out_shape = tuple(eqn.outvars[0].aval.shape)
    if any(d != 1 for d in params["lhs_dilation"]):
        raise NotSliceable("a convolution with input dilation")
    held = list(out)
    if params["batch_group_count"] != 1:
        held[out_spec[0]] = (0, out_shape[out_spec[0]])
    if params["feature_group_count"] != 1 or params["batch_group_count"] != 1:
        held[out_spec[1]] = (0, out_shape[out_spec[1]])
    lhs = [(0, n) for n in lhs_shape]
    rhs = [(0, n) for n in rhs_shape]
    lhs[lhs_spec[0]] = held[out_spec[0]]
    rhs[rhs_spec[0]] = held[out_spec[1]]
    padding = []
    for k, (stride, dilation, (low, _)) in enumerate(
        zip(params["window_strides"], params["rhs_dilation"], params["padding"], strict=True)
    ):
        a, b = held[out_spec[2 + k]]
        reach = (rhs_shape[rhs_spec[2 + k]] - 1) * dilation + 1
        n = lhs_shape[lhs_spec[2 + k]]
        start, stop = a * stride - low, (b - 1) * stride + reach - low  # padded positions read
        first = min(max(start, 0), n)
        last = max(first, min(stop, n))
        lhs[lhs_spec[2 + k]] = (first, last)
        padding.append((first - start, stop - last))
    return tuple(lhs), tuple(rhs), tuple(held), tuple(padding)


def _conv_back(eqn: Any, outs: Regions) -> Regions:
    (out,) = outs
    assert out is not None
    lhs, rhs, _, _ = _conv_plan(eqn, out)
    return [lhs, rhs]


def _conv_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    (out,) = outs
    assert out is not None
    _, _, held, padding = _conv_plan(eqn, out)
    params = dict(eqn.params, padding=padding)
    with eqn.ctx.manager:
        value = eqn.primitive.bind(*operands, **params)
    return [crop(value, held, out)]


# --- gather: a box of its batch dimensions reads those rows of the indices and, along the
# operand's batching dimensions, the matching rows of the operand; every other operand dimension
# whole (where the indices point is known only at run time), the slices themselves computed whole


def _gather_plan(eqn: Any, out: Region) -> tuple[Region, Region, Region]:
    """The operand's and the indices' regions, and the output region the gather of those makes."""
    numbers = eqn.params["dimension_numbers"]
    operand_shape, indices_shape = _shapes(eqn)
    out_shape = tuple(eqn.outvars[0].aval.shape)
    batch = [d for d in range(len(out_shape)) if d not in numbers.offset_dims]
    held = [(0, n) if d in numbers.offset_dims else out[d] for d, n in enumerate(out_shape)]
    indices = [held[d] for d in batch] + [(0, indices_shape[-1])]
    operand = [(0, n) for n in operand_shape]
    for d, i in zip(
        numbers.operand_batching_dims, numbers.start_indices_batching_dims, strict=True
    ):
        operand[d] = indices[i]
    return tuple(operand), tuple(indices), tuple(held)


def _gather_back(eqn: Any, outs: Regions) -> Regions:
    (out,) = outs
    assert out is not None
    operand, indices, _ = _gather_plan(eqn, out)
    return [operand, indices]


def _gather_forward(eqn: Any, operands: list[Any], outs: Regions) -> list[Any]:
    (out,) = outs
    assert out is not None
    _, _, held = _gather_plan(eqn, out)
    with eqn.ctx.manager:
        value = eqn.primitive.bind(*operands, **eqn.params)
    return [crop(value, held, out)]


# name: (operand regions from the results', results from the operands' regions); results
# computed by the primitive itself on the operands' regions where no forward step is given
Back = Callable[[Any, Regions], Regions]
Forward = Callable[[Any, list[Any], Regions], list[Any]]
RULES: dict[str, tuple[Back, Forward | None]] = {
    "reshape": (_reshape_back, _reshape_forward),
    "slice": (_slice_back, _slice_forward),
    "pad": (_pad_back, _pad_forward),
    "concatenate": (_concatenate_back, _concatenate_forward),
    "split": (_split_back, _split_forward),
    "rev": (_rev_back, None),
    "conv_general_dilated": (_conv_back, _conv_forward),
    "gather": (_gather_back, _gather_forward),
    "sort": (_whole_axis_back, _whole_axis_forward),
    "top_k": (_whole_axis_back, _whole_axis_forward),
    **{name: (_cumulative_back, _cumulative_forward) for name in CUMULATIVE_REDUCTIONS},
}


def dot_regions(numbers: Any, shapes: list[tuple[int, ...]], out: Region) -> Regions:
    """The operands' regions a dot_general's output region `out` reads: the contracted
    dimensions whole, the batch and free ones where `out` is."""
    (contracting, batch) = numbers
    free = [
        [d for d in range(len(shape)) if d not in contracting[side] and d not in batch[side]]
        for side, shape in enumerate(shapes)
    ]
    offsets = (len(batch[0]), len(batch[0]) + len(free[0]))
    regions: list[Region | None] = []
    for side, shape in enumerate(shapes):
        region = []
        for d, n in enumerate(shape):
            if d in contracting[side]:
                region.append((0, n))
            elif d in batch[side]:
                region.append(out[batch[side].index(d)])
            else:
                region.append(out[offsets[side] + free[side].index(d)])
        regions.append(tuple(region))
    return regions
