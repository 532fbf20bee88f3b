"""Classes of output blocks: a pallas_call's scalar control evaluated at every point of its
production grid at once (numpy arrays over the grid points, scalar work only), and the output
blocks grouped by the values it takes. Blocks of one class take the same branches, selects, loop
trip counts and index-map choices at every step, so they compute the same function of their
inputs; a sample that holds one block of every class (and the edges) covers the kernel.

A value is known when it derives only from `program_id`, `num_programs`, literals and reads of
the scalar-prefetch refs (their concrete values); everything else (loaded vector data, scalars
read from blocks) is unknown. Control on unknown values is counted and said, never classed.
The same evaluation gives every output's block index at every grid step: a block left and
visited again is lost on a TPU (written back when left, never read back). Numpy; jax only for
the pytrees of ref reads and an index map numpy cannot follow (blocks.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from jax import tree_util
from jax.extend.core import ClosedJaxpr, Jaxpr

from maxkernel_tui.kernels.evaluation.tiles.blocks import block_indices, sample_blocks
from maxkernel_tui.kernels.evaluation.tiles.faults import KernelFault, NotSampleable
from maxkernel_tui.kernels.perf.primitive_names import CALL_BODIES
from maxkernel_tui.kernels.report.reasons import Reason

# Grid points times equations evaluated, at most (about a second of numpy, 200 MB of decisions).
MAX_WORK = 10**8
# Iterations of a loop evaluated, at most; a longer loop's carries become unknown.
MAX_TRIPS = 256
# Classes a sample covers one block each; beyond, the whole grid runs if it has at most
# WHOLE_GRID blocks, else the kernel is checked at small shapes only.
MAX_CLASSES = 64
WHOLE_GRID = 256

# A known value: a numpy array over the grid points, shape (points,) or () when constant.
Known = np.ndarray

_COMPARE: dict[str, Callable[..., Any]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
_PLAIN: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "neg": np.negative,
    "floor": np.floor,
    "ceil": np.ceil,
    "copy": np.copy,
    "copy_p": np.copy,
}
# Results whose sign (not value) is a decision: `i // 2` does not split every block.
_SIGNED: dict[str, Callable[..., Any]] = {
    "abs": np.abs,
    "sign": np.sign,
    "div": lambda a, b: _divide(a, b)[0],
    "rem": lambda a, b: _divide(a, b)[1],
    "floor_divide": lambda a, b: _floor_divide(a, b)[0],
    "remainder": lambda a, b: _floor_divide(a, b)[1],
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "not": np.invert,
    "shift_left": np.left_shift,
    "shift_right_arithmetic": np.right_shift,
    "shift_right_logical": lambda a, b: (a.astype(np.uint64) >> b).astype(a.dtype),
}
_PASS = ("multiple_of", "optimization_barrier")


@dataclass(frozen=True)
class Control:
    """A pallas_call's output blocks by class, over the output axes' grid in row-major order."""

    output_axes: tuple[int, ...]  # the grid axes that choose an output block
    classes: np.ndarray  # class number of each output block
    count: int
    on_data: int  # scalar control on unknown values (loaded data): not classed
    # visit number of each point of the output axes' grid: consecutive points that keep every
    # output block where it is (a ragged kernel's work items of one query block) are one visit,
    # the blocks stay resident across them; None: every point is its own visit
    visits: np.ndarray | None = None

    def visit_count(self) -> int:
        return len(self.classes) if self.visits is None else int(self.visits[-1]) + 1


class _Table:
    """A scalar-prefetch ref: its concrete values, known until the kernel writes to it."""

    def __init__(self, values: np.ndarray) -> None:
        self.values, self.written = values, False


class _Evaluator:
    def __init__(self, ids: np.ndarray, grid: tuple[int, ...], name: str, skip: Any) -> None:
        self.ids, self.grid, self.name = ids, grid, name
        # program_id and num_programs number the grid axes that are not vmapped
        self.axes = [axis for axis in range(len(grid)) if axis not in skip]
        self.points = ids.shape[1]
        self.work = 0
        self.decisions: dict[int, list[np.ndarray]] = {}
        self.on_data: set[int] = set()

    def run(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], mask: Known) -> list[Any]:
        env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, args, strict=True))

        def read(atom: Any) -> Any:
            if hasattr(atom, "val"):  # a literal
                return np.asarray(atom.val) if np.ndim(atom.val) == 0 else None
            return env.get(atom)

        for eqn in jaxpr.eqns:
            self.work += self.points
            if self.work > MAX_WORK:
                raise NotSampleable(
                    f"{self.name}'s scalar control over {self.points} grid points is more than "
                    "this check evaluates, so its classes of output blocks are unknown"
                )
            try:
                outs = self.equation(eqn, [read(v) for v in eqn.invars], mask)
            except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError):
                # a form of an equation this evaluator does not follow: not classed, said
                self.on_data.add(id(eqn))
                outs = [None] * len(eqn.outvars)
            for var, value in zip(eqn.outvars, outs, strict=True):
                scalar = getattr(var.aval, "shape", None) == ()
                env[var] = value if scalar or isinstance(value, _Table) else None
        return [read(v) for v in jaxpr.outvars]

    def record(self, eqn: Any, value: Known, mask: Known) -> None:
        taken = np.where(mask, np.asarray(value).astype(np.int16), -1)
        self.decisions.setdefault(id(eqn), []).append(np.broadcast_to(taken, (self.points,)))

    def equation(self, eqn: Any, ins: list[Any], mask: Known) -> list[Any]:
        name, params, nout = eqn.primitive.name, eqn.params, len(eqn.outvars)
        unknown: list[Any] = [None] * nout
        if name == "program_id":
            return [self.ids[self.axes[params["axis"]]]]
        if name == "num_programs":
            return [np.asarray(self.grid[self.axes[params["axis"]]], np.int32)]
        if name in ("get", "load"):
            return [_read_table(ins, params)] if nout == 1 else unknown
        if name in ("swap", "addupdate") and isinstance(ins[0], _Table):
            ins[0].written = True
        if name == "cond":
            return self.cond(eqn, ins, mask)
        if name == "while":
            return self.while_loop(eqn, ins, mask)
        if name == "scan":
            return self.scan(eqn, ins, mask)
        inner = params.get(CALL_BODIES.get(name, ""))
        if inner is not None:
            if params.get("name") in _SIGNED and all(isinstance(v, np.ndarray) for v in ins):
                return self.signed(eqn, params["name"], ins, mask)
            return self.run(getattr(inner, "jaxpr", inner), getattr(inner, "consts", ()), ins, mask)
        if name == "run_scoped":  # its inputs are the body's consts; its invars new scratch
            inner = params["jaxpr"]
            return self.run(inner, ins, [None] * len(inner.invars), mask)[:nout]
        if any(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in params.values()):
            self.on_data.add(id(eqn))  # control inside a primitive this check does not enter
            return unknown
        if name in _PASS:
            return list(ins)
        if any(v is None or isinstance(v, _Table) for v in ins):
            if name == "select_n" and ins[0] is None and eqn.outvars[0].aval.shape == ():
                self.on_data.add(id(eqn))
            return unknown
        with np.errstate(all="ignore"):
            return self.arithmetic(eqn, name, ins, mask)

    def arithmetic(self, eqn: Any, name: str, ins: list[Any], mask: Known) -> list[Any]:
        dtype = eqn.outvars[0].aval.dtype
        if name in _COMPARE:
            out = _COMPARE[name](*ins)
            self.record(eqn, out, mask)
            return [out]
        if name in _PLAIN:
            return [np.asarray(_PLAIN[name](*ins)).astype(dtype)]
        if name in _SIGNED:
            return self.signed(eqn, name, ins, mask)
        if name == "convert_element_type":
            return [np.asarray(ins[0]).astype(eqn.params["new_dtype"])]
        if name == "integer_pow":
            return [np.asarray(ins[0] ** eqn.params["y"]).astype(dtype)]
        if name == "select_n":
            chosen = np.asarray(ins[0]).astype(np.int32)
            self.record(eqn, chosen, mask)
            out = ins[1]
            for case, value in enumerate(ins[2:], start=1):
                out = np.where(chosen == case, value, out)
            return [np.asarray(out).astype(dtype)]
        if name in ("min", "max", "clamp"):
            return self.choice(eqn, name, ins, mask)
        return [None] * len(eqn.outvars)

    def signed(self, eqn: Any, name: str, ins: list[Any], mask: Known) -> list[Any]:
        out = np.asarray(_SIGNED[name](*ins)).astype(eqn.outvars[0].aval.dtype)
        self.record(eqn, np.sign(out) if out.dtype != np.bool_ else out, mask)
        return [out]

    def choice(self, eqn: Any, name: str, ins: list[Any], mask: Known) -> list[Any]:
        if name == "clamp":  # clamp(low, x, high): which bound holds
            low, x, high = ins
            self.record(eqn, np.where(x < low, 0, np.where(x > high, 2, 1)), mask)
            return [np.clip(x, low, high).astype(x.dtype)]
        a, b = ins
        self.record(eqn, a < b, mask)
        return [np.asarray(np.minimum(a, b) if name == "min" else np.maximum(a, b))]

    def cond(self, eqn: Any, ins: list[Any], mask: Known) -> list[Any]:
        branches, index, operands = eqn.params["branches"], ins[0], ins[1:]
        if index is None:  # a branch on data: every branch's own control still classed
            self.on_data.add(id(eqn))
            for branch in branches:
                self.run(branch.jaxpr, branch.consts, operands, mask)
            return [None] * len(eqn.outvars)
        index = np.clip(index, 0, len(branches) - 1)
        self.record(eqn, index, mask)
        results = [
            self.run(branch.jaxpr, branch.consts, operands, mask & (index == number))
            for number, branch in enumerate(branches)
        ]
        outs: list[Any] = []
        for values in zip(*results, strict=True):
            if any(v is None or isinstance(v, _Table) for v in values):
                outs.append(None)
                continue
            out = values[0]
            for number, value in enumerate(values[1:], start=1):
                out = np.where(index == number, value, out)
            outs.append(out)
        return outs

    def iteration(self, jaxpr: Any, args: Sequence[Any], mask: Known, into: dict[int, Any]) -> Any:
        """One loop iteration, its decisions folded into `into` as sets of values (bits)."""
        outer, self.decisions = self.decisions, {}
        try:
            outs = self.run(jaxpr.jaxpr, jaxpr.consts, args, mask)
        finally:
            found, self.decisions = self.decisions, outer
        for key, values in found.items():
            for value in values:
                bits = np.left_shift(1, np.clip(value.astype(np.int32) + 1, 0, 14)).astype(np.int16)
                # points past their last iteration (or never in the loop) add nothing
                into[key] = into.get(key, 0) | np.where(mask, bits, 0).astype(np.int16)
        return outs

    def affordable(self, body: Any, trips: int) -> bool:
        """Whether `trips` iterations of a loop body leave half the work allowed for the rest."""
        return bool(self.work + trips * self.points * _size(body.jaxpr) <= MAX_WORK // 2)

    def fold(self, folded: dict[int, Any]) -> None:
        for key, bits in folded.items():
            self.decisions.setdefault(key, []).append(np.broadcast_to(bits, (self.points,)))

    def scan(self, eqn: Any, ins: list[Any], mask: Known) -> list[Any]:
        params = eqn.params
        consts, carry = ins[: params["num_consts"]], ins[params["num_consts"] :]
        carry_count = params["num_carry"]
        carry, xs = list(carry[:carry_count]), [None] * (len(carry) - carry_count)
        folded: dict[int, Any] = {}
        whole = params["length"] <= MAX_TRIPS and self.affordable(params["jaxpr"], params["length"])
        trips = params["length"] if whole else 1
        if not whole:  # one iteration, on carries unknown: what depends on them is not classed
            self.on_data.add(id(eqn))
            carry = [None] * carry_count
        for _ in range(trips):
            outs = self.iteration(params["jaxpr"], [*consts, *carry, *xs], mask, folded)
            carry = outs[:carry_count] if whole else [None] * carry_count
        self.fold(folded)
        return [*carry, *[None] * (len(eqn.outvars) - carry_count)]

    def while_loop(self, eqn: Any, ins: list[Any], mask: Known) -> list[Any]:
        params = eqn.params
        cond_n, body_n = params["cond_nconsts"], params["body_nconsts"]
        cond_consts, body_consts = ins[:cond_n], ins[cond_n : cond_n + body_n]
        carry: list[Any] = list(ins[cond_n + body_n :])
        active, trips = np.broadcast_to(mask, (self.points,)), np.zeros(self.points, np.int32)
        folded: dict[int, Any] = {}
        for _ in range(MAX_TRIPS + 1):
            (going,) = self.iteration(params["cond_jaxpr"], [*cond_consts, *carry], active, folded)
            too_long = trips.max() >= MAX_TRIPS or not self.affordable(params["body_jaxpr"], 1)
            if going is None or too_long:  # on carries unknown: not classed
                self.on_data.add(id(eqn))
                carry = [None] * len(carry)
                self.iteration(params["body_jaxpr"], [*body_consts, *carry], active, folded)
                break
            active = active & going
            if not active.any():
                break
            outs = self.iteration(params["body_jaxpr"], [*body_consts, *carry], active, folded)
            carry = [
                None if new is None or old is None else np.where(active, new, old)
                for old, new in zip(carry, outs, strict=True)
            ]
            trips = trips + active
        self.record(eqn, np.minimum(trips, 2), mask)
        self.fold(folded)
        return carry


def _size(jaxpr: Any) -> int:
    """Equations of a jaxpr, those of the jaxprs inside it counted too."""
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for param in eqn.params.values():
            for inner in param if isinstance(param, tuple) else (param,):
                if isinstance(inner, (Jaxpr, ClosedJaxpr)):
                    total += _size(getattr(inner, "jaxpr", inner))
    return total


def _read_table(ins: list[Any], params: dict[str, Any]) -> Any:
    """A scalar read of a scalar-prefetch ref at known indices; anything else unknown."""
    table = ins[0]
    if not isinstance(table, _Table) or table.written:
        return None
    try:
        transforms = tree_util.tree_unflatten(params["tree"], ins[1:])
    except (TypeError, ValueError):
        return None
    if len(transforms) != 1 or not hasattr(transforms[0], "indices"):
        return None
    indices = transforms[0].indices
    if len(indices) != table.values.ndim or not all(isinstance(i, np.ndarray) for i in indices):
        return None
    clipped = tuple(
        np.clip(i, 0, size - 1) for i, size in zip(indices, table.values.shape, strict=True)
    )
    return np.asarray(table.values[clipped])


def _divide(a: Any, b: Any) -> tuple[Any, Any]:
    """lax.div and lax.rem: rounding toward zero (b == 0 gives 0, not a trap)."""
    a, b = np.asarray(a), np.asarray(b)
    if np.issubdtype(np.result_type(a, b), np.floating):
        return a / b, np.fmod(a, b)
    safe = np.where(b == 0, 1, b)
    quotient = np.sign(a) * np.sign(safe) * (np.abs(a) // np.abs(safe))
    return quotient, a - quotient * safe


def _floor_divide(a: Any, b: Any) -> tuple[Any, Any]:
    safe = np.where(np.asarray(b) == 0, 1, b)
    return np.floor_divide(a, safe), np.remainder(a, safe)


def evaluate(eqn: Any, index_operands: list[np.ndarray], name: str) -> Control:
    """The output axes (those along which some output's block index changes anywhere) and the
    classes of a pallas_call's output blocks; raises KernelFault when an output block is left
    and visited again."""
    mapping = eqn.params["grid_mapping"]
    grid = tuple(int(g) for g in mapping.grid)
    points = math.prod(grid)
    if points * max(len(eqn.params["jaxpr"].eqns), 1) > MAX_WORK:
        raise NotSampleable(
            f"{name}'s grid of {points} points is too large to evaluate its scalar control "
            "at every point, so its classes of output blocks are unknown"
        )
    ids = np.indices(grid, np.int32).reshape(len(grid), points)
    tables = [_Table(np.asarray(v)) for v in index_operands]
    evaluator = _Evaluator(ids, grid, name, mapping.vmapped_dims)
    everywhere = np.ones((), np.bool_)
    body = eqn.params["jaxpr"]
    # the body's refs: the scalar-prefetch refs first, then blocks and scratch (unknown)
    refs = [*tables, *[None] * (len(body.invars) - len(tables))]
    evaluator.run(body, [None] * len(body.constvars), refs, everywhere)
    output_axes: set[int] = set()
    block_tables: list[np.ndarray] = []  # each output's block index at every grid point
    for number, block in enumerate(mapping.block_mappings):
        index_map = block.index_map_jaxpr
        found = evaluator.run(index_map.jaxpr, index_map.consts, [*ids, *tables], everywhere)
        if number < mapping.num_inputs or not found:
            continue
        if any(index is None for index in found):  # beyond numpy here: jax evaluates it
            rows = block_indices(block, ids.T, index_operands)
        else:
            rows = np.stack([np.broadcast_to(i, (points,)) for i in found], axis=1)
        _check_revisits(rows, grid, f"{name}'s output {number - mapping.num_inputs}")
        table = rows.reshape(*grid, rows.shape[1])
        block_tables.append(table)
        output_axes |= {a for a in range(len(grid)) if (np.diff(table, axis=a) != 0).any()}
    axes = tuple(sorted(output_axes))
    return replace(_group(evaluator, grid, axes), visits=_visits(block_tables, grid, axes))


def _visits(tables: list[np.ndarray], grid: tuple[int, ...], axes: tuple[int, ...]) -> np.ndarray:
    """The visit number of each point of the output axes' grid (row-major). Consecutive points
    are one visit while some output keeps its block there (a ragged kernel's work items of one
    query block; a gradient summed over every row block beside the rows' own gradient): that
    output's state runs across them, so a sample must run them together. A visit longer than
    WHOLE_GRID points is cut where any output's block changes instead: the sample could not
    run it whole, and the output kept resident across the cut is then undecided. The block
    index does not change along the other axes (that is what makes them not output axes), so
    their first point stands for all."""
    points = math.prod(grid[a] for a in axes)
    if not tables or not axes:
        return np.arange(points, dtype=np.int64)
    index = tuple(slice(None) if a in axes else 0 for a in range(len(grid)))
    per_output = [t[index].reshape(points, -1) for t in tables]
    changed = np.stack([np.any(c[1:] != c[:-1], axis=1) for c in per_output])
    resident = np.concatenate([[0], np.cumsum(changed.all(axis=0))]).astype(np.int64)
    if np.bincount(resident).max() <= WHOLE_GRID:
        return resident
    return np.concatenate([[0], np.cumsum(changed.any(axis=0))]).astype(np.int64)


def _check_revisits(rows: np.ndarray, grid: tuple[int, ...], where: str) -> None:
    """A block index (a row) taken in two separate runs of consecutive grid steps (row-major
    order)."""
    changes = np.flatnonzero(np.any(rows[1:] != rows[:-1], axis=1)) + 1
    starts = np.concatenate([[0], changes])
    runs = rows[starts]
    unique, counts = np.unique(runs, axis=0, return_counts=True)
    if not (counts > 1).any():
        return
    block = unique[counts > 1][0]
    repeated = [int(starts[k]) for k in np.flatnonzero((runs == block).all(axis=1))[:2]]
    steps = [tuple(int(s) for s in np.unravel_index(k, grid)) for k in repeated]
    raise KernelFault(
        Reason.TILES_OUTPUT_REVISITED,
        f"{where}'s block {tuple(int(b) for b in block)} is visited at grid step {steps[0]}, "
        f"left, and visited again at {steps[1]}",
    )


def _group(evaluator: _Evaluator, grid: tuple[int, ...], output_axes: tuple[int, ...]) -> Control:
    blocks = math.prod(grid[a] for a in output_axes)
    rows = [v for values in evaluator.decisions.values() for v in values if (v != v[0]).any()]
    if not rows:
        return Control(output_axes, np.zeros(blocks, np.int64), 1, len(evaluator.on_data))
    table = np.stack(rows).reshape(len(rows), *grid)
    table = np.moveaxis(table, [1 + a for a in output_axes], range(len(output_axes)))
    signatures = table.reshape(blocks, -1)
    _, classes = np.unique(signatures, axis=0, return_inverse=True)
    classes = classes.reshape(-1)
    return Control(output_axes, classes, int(classes.max()) + 1, len(evaluator.on_data))


def cover(
    sizes: tuple[int, ...],
    control: Control,
    rng: np.random.Generator,
    random_blocks: int,
    name: str,
    required: np.ndarray | None = None,
) -> np.ndarray:
    """The sample: the edges, the `required` blocks and a random draw (sample_blocks), and one
    block of every class not yet held, each grown to its whole visit (every point that keeps
    its output blocks resident); the whole output grid when the classes are too many to cover
    one by one."""
    sample = sample_blocks(sizes, rng, random_blocks, required=required)
    total = math.prod(sizes)
    if control.count > MAX_CLASSES:
        if total > WHOLE_GRID:
            raise NotSampleable(
                f"{name}'s output blocks fall in {control.count} classes by its scalar control, "
                f"more than the {MAX_CLASSES} a sample covers, and its {total} output blocks "
                "are too many to run whole"
            )
        return np.indices(sizes).reshape(len(sizes), total).T.astype(np.int64)
    if not sizes:
        return sample
    held = set(control.classes[np.ravel_multi_index(sample.T, sizes)].tolist())
    chosen = [tuple(row) for row in sample.tolist()]
    for number in range(control.count):
        if number not in held:
            members = np.flatnonzero(control.classes == number)
            chosen.append(np.unravel_index(int(rng.choice(members)), sizes))
    rows = np.array(sorted({tuple(int(i) for i in row) for row in chosen}), dtype=np.int64)
    return whole_visits(rows, sizes, control.visits)


def whole_visits(
    sample: np.ndarray, sizes: tuple[int, ...], visits: np.ndarray | None
) -> np.ndarray:
    """`sample` with every point of each visit it touches (a block left mid-visit and taken up
    again later is lost on a TPU, and jax's interpreter refuses it), in grid order."""
    if visits is None or not len(sample):
        return sample
    touched = np.unique(visits[np.ravel_multi_index(sample.T, sizes)])
    flat = np.flatnonzero(np.isin(visits, touched))
    return np.stack(np.unravel_index(flat, sizes), axis=1).astype(np.int64)
