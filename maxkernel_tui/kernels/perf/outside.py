"""The HBM traffic XLA spends outside a candidate's Pallas kernels: the copies its wrapper makes
before and after them (transposes, pads, casts, broadcasts, and reshapes that change the tiled
layout). A `pallas_call` is a custom call XLA cannot fuse into, so every operand of one that is
not a program input or another kernel's output as it is, is written to HBM by an XLA fusion that
reads what it is made from; the same holds for the program's results. Measured on a v5e, the
built-in 2-D convolutions' NCHW-to-(channels, pixels) reshapes cost about 4 ms beside kernels the
model put at 1-6 ms, which the model had counted as free.

On a TPU an array's two minor dimensions are tiled in HBM (8 rows by 128 lanes, narrower types
packed into the tile's 32-bit words), so a reshape is free (a bitcast) only when it leaves the
minor dimension alone and the second-minor one either alone or a whole number of sublane tiles on
both sides; anything else is a copy.
Control flow (scan, while, cond) with a kernel inside is a boundary: what goes in is
materialised, what comes out is read as it is; without one it is XLA work like any other, which
reads what goes in and writes what comes out. A result is the exception: XLA chooses its layout,
and where its row-major one would pad the tiles while a kernel's output, transposed into it,
tiles exactly, it lays the result out as the kernel wrote it: the transpose is a bitcast (a 2-D
convolution written pixels-major, (126, 126, 128, 128), into (128, 128, 126, 126); measured on a
v5e: benchmarks/results/conv_output_layout.md). No jax import: the jaxpr's objects are read by
their attributes."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from maxkernel_tui.codec import JsonData

# primitives that re-describe an array without moving it, when the tiled layout allows (above)
_VIEWS = {"reshape", "squeeze", "expand_dims"}
# calls whose body is inlined: their operands and results are the body's
_CALLS = {"pjit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call"}
_CONTROL = {"scan", "while", "cond", "custom_vjp_call", "custom_vjp_call_jaxpr"}
# a fusion holding one of these reads its sources whole, not only what reaches its result
_READS_WHOLE = {"reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin", "dot_general"}
# XLA tiles an array in HBM by 8 rows of 128 lanes whatever its width: a 16-bit or 8-bit type
# packs pairs or quads into a 32-bit word of the tile (bf16[16384,16,8,128] is laid out
# {3,2,1,0:T(8,128)(2,1)} on a v5e, so merging its (16, 8) rows is a bitcast; compiled with libtpu)
_TILE_ROWS = 8


@dataclass(frozen=True)
class OutsideTraffic(JsonData):
    """What XLA moves outside the kernels, per run of the program."""

    bytes: int = 0  # written by XLA's fusions plus read by them
    copies: int = 0  # values XLA materialises for a kernel or as a result
    largest: str = ""  # the largest of them, e.g. "transpose to f32[128,64,16384]"
    # of `bytes`, those read and written by copies into another layout (a transpose, or a view
    # that moves the tiles), which a TPU does not make at the HBM's pace (xla_model.py)
    relayout_read: int = 0
    relayout_written: int = 0

    def words(self) -> str:
        """e.g. "3.16 GB moved by XLA outside the kernels in 2 copies (largest: ...)"."""
        if not self.copies:
            return "no copies by XLA outside the kernels"
        return (
            f"{self.bytes / 1e9:.3g} GB moved by XLA outside the kernels in {self.copies} "
            f"cop{'y' if self.copies == 1 else 'ies'} (largest: {self.largest})"
        )


@dataclass(frozen=True)
class _Op:
    name: str
    invars: list[Any]
    outvars: list[Any]
    eqn: Any


def outside_traffic(closed_jaxpr: Any) -> OutsideTraffic:
    """The copies XLA makes around the Pallas kernels of `closed_jaxpr` and the bytes they move
    (the module docstring's rules)."""
    ops = list(_flatten(closed_jaxpr.jaxpr, {}))
    producer = {out: op for op in ops for out in op.outvars}
    resolve = _Resolver(ops)
    wanted = [v for op in ops if _is_boundary(op) for v in op.invars]
    results = {resolve(v) for v in closed_jaxpr.jaxpr.outvars if _is_var(v)}
    wanted = [resolve(v) for v in [*wanted, *closed_jaxpr.jaxpr.outvars]]
    moved, copies, largest = 0, 0, (0, "")
    relayout_read = relayout_written = 0
    for value in dict.fromkeys(v for v in wanted if _is_var(v)):
        op = producer.get(value)
        if op is None or _is_boundary(op):
            continue  # a program input, or another kernel's result as it is
        chain, sources = _chain(value, producer)
        if all(_is_free(o) for o in chain):
            continue
        if value in results and _laid_out_as_written(value, chain, sources, producer):
            continue
        whole = any(o.name in _READS_WHOLE for o in chain)
        written = _nbytes(value)
        read = sum(
            _nbytes(s) if whole else min(_nbytes(s), _elements(value) * _itemsize(s))
            for s in sources
        )
        moved += written + read
        copies += 1
        if any(o.name == "transpose" or (o.name in _VIEWS and not _is_free(o)) for o in chain):
            relayout_read, relayout_written = relayout_read + read, relayout_written + written
        if written > largest[0]:
            largest = (written, f"{op.name} to {_aval_words(value)}")
    return OutsideTraffic(int(moved), copies, largest[1], int(relayout_read), int(relayout_written))


def _flatten(jaxpr: Any, alias: dict[Any, Any]) -> Iterator[_Op]:
    """The program's operations with calls inlined; `alias` maps a call body's variables to the
    caller's (filled as calls are entered and left)."""

    def name_of(v: Any) -> Any:
        return alias.get(v, v) if _is_var(v) else v

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        body = _call_body(eqn) if name in _CALLS else None
        if body is None:
            yield _Op(name, [name_of(v) for v in eqn.invars], list(eqn.outvars), eqn)
            continue
        for inner, outer in zip(body.invars, eqn.invars, strict=False):
            alias[inner] = name_of(outer)
        yield from _flatten(body, alias)
        for outer, inner in zip(eqn.outvars, body.outvars, strict=False):
            if _is_var(inner):
                alias[outer] = name_of(inner)
                yield _Op("alias", [name_of(inner)], [outer], None)


class _Resolver:
    """A variable through the aliases calls leave behind, to the operation that makes it."""

    def __init__(self, ops: list[_Op]) -> None:
        self.through = {op.outvars[0]: op.invars[0] for op in ops if op.name == "alias"}

    def __call__(self, v: Any) -> Any:
        while _is_var(v) and v in self.through:
            v = self.through[v]
        return v


def _call_body(eqn: Any) -> Any:
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        body = eqn.params.get(key)
        if body is not None:
            return getattr(body, "jaxpr", body)
    return None


def _chain(value: Any, producer: dict[Any, _Op]) -> tuple[list[_Op], list[Any]]:
    """The XLA operations `value` is made by (back to program inputs, kernel results and control
    flow) and the arrays they read there."""
    chain, sources, seen, stack = [], [], set(), [value]
    while stack:
        v = stack.pop()
        if not _is_var(v) or v in seen:
            continue
        seen.add(v)
        op = producer.get(v)
        if op is None or _is_boundary(op):
            sources.append(v)
            continue
        if op.name != "alias":
            chain.append(op)
        stack.extend(op.invars)
    return chain, sources


def _is_boundary(op: _Op) -> bool:
    return op.name == "pallas_call" or (op.name in _CONTROL and _holds_a_kernel(op.eqn))


def _holds_a_kernel(eqn: Any) -> bool:
    for value in eqn.params.values():
        bodies: Any = value if isinstance(value, tuple | list) else (value,)
        for body in bodies:
            inner: Any = getattr(body, "jaxpr", body)
            if not hasattr(inner, "eqns"):
                continue
            if any(e.primitive.name == "pallas_call" or _holds_a_kernel(e) for e in inner.eqns):
                return True
    return False


def _is_free(op: _Op) -> bool:
    """A view that leaves the tiled layout as it is (the module docstring), or a no-op cast."""
    if op.name == "convert_element_type":
        return bool(_dtype(op.invars[0]) == _dtype(op.outvars[0]))
    # x[:, None] is a broadcast that adds unit dimensions only: XLA makes it a reshape
    unit_broadcast = op.name == "broadcast_in_dim" and _is_var(op.invars[0])
    unit_broadcast = unit_broadcast and _elements(op.invars[0]) == _elements(op.outvars[0])
    if op.name not in _VIEWS and not unit_broadcast:
        return False
    before, after = _shape(op.invars[0]), _shape(op.outvars[0])
    return _same_tiles(before, after)


def _laid_out_as_written(
    value: Any, chain: list[_Op], sources: list[Any], producer: dict[Any, _Op]
) -> bool:
    """Whether XLA gives the result `value` the layout its one kernel output has: the chain is
    views and one transpose of that output, which tiles exactly where `value` row-major would
    not."""
    if len(sources) != 1 or not _is_var(sources[0]) or sources[0] not in producer:
        return False
    names = [o.name for o in chain]
    if names.count("transpose") != 1 or any(n not in (*_VIEWS, "transpose") for n in names):
        return False
    return _tiles_exactly(_shape(sources[0]), _TILE_ROWS) and not _tiles_exactly(
        _shape(value), _TILE_ROWS
    )


def _tiles_exactly(shape: tuple[int, ...], rows: int) -> bool:
    """Whether an array of `shape`, row-major, fills its (rows, 128) tiles without padding."""
    minor, second = (shape[-1:] or (1,))[0], (shape[-2:-1] or (1,))[0]
    return minor % 128 == 0 and second % rows == 0


def _same_tiles(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    if before == after:
        return True
    if (before[-1:] or (1,)) != (after[-1:] or (1,)):
        return False
    rows_before, rows_after = (before[-2:-1] or (1,))[0], (after[-2:-1] or (1,))[0]
    if rows_before == rows_after:
        return True
    return rows_before % _TILE_ROWS == 0 and rows_after % _TILE_ROWS == 0


def _is_var(v: Any) -> bool:
    return hasattr(v, "aval") and not hasattr(v, "val")  # a Var, not a Literal


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in getattr(v.aval, "shape", ()))


def _dtype(v: Any) -> Any:
    return getattr(v.aval, "dtype", None)


def _itemsize(v: Any) -> int:
    dtype = _dtype(v)
    return int(np.dtype(dtype).itemsize) if dtype is not None else 0


def _elements(v: Any) -> int:
    return math.prod(_shape(v))


def _nbytes(v: Any) -> int:
    return _elements(v) * _itemsize(v)


def _aval_words(v: Any) -> str:
    dtype = _dtype(v)
    short = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32"}
    name = short.get(str(dtype), str(dtype))
    return f"{name}[{','.join(str(d) for d in _shape(v))}]"
