"""Compact operands for a sampled pallas_call (kernel_run.py), so that its cost follows the sample
and not the production shapes. Imports jax.

TPU interpret mode copies every operand and output of a call into its own buffers (memory.py), so
a sample of 6 blocks bound over production operands paid for all of them. Here each blocked
operand is gathered into a compact one, its distinct blocks at the sampled grid points stacked
along the first dimension ("slots"), and its index map rewritten to return the slot of the grid
point (a table of the sampled grid, captured as a constant). Outputs get one slot per sampled
output block; the interpreted call runs on the compact buffers and the slots are placed back at
their production positions in an array of production shape, the rest left uninitialised (NaN),
as the interpreter would have left the blocks it never visited.

The interpreter sees the same thing as over the production operands: the same block for the same
grid point, a partial edge block padded with its uninitialised value (interpret mode pads an
operand to whole blocks with it), a block changing exactly where it changed (so blocks are
copied in and written back at the same steps). What cannot be made compact stays whole and is
named in `Compacted.whole`: operands the kernel reads by DMA (memory space ANY/HBM), `Element`
dims, transformed blocks, aliased inputs and outputs, a block index outside the operand (the
interpreter then fails as it would have), rank-0 blocks. Scalar-prefetch operands stay whole.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import api_util
from jax._src import linear_util as lu
from jax._src.interpreters import partial_eval as pe
from jax._src.pallas.mosaic.interpret.utils import get_uninitialized_value
from jax.extend import core

from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory
from maxkernel_tui.kernels.evaluation.tiles.blocks import Region, block_indices, dim_kind
from maxkernel_tui.kernels.evaluation.tiles.faults import NotSampleable

# What interpret mode fills memory nobody wrote with (InterpretParams.uninitialized_memory).
Uninitialized = Literal["nan", "zero"]

# The memory spaces a block is copied into from the operand by the pipeline (not by the
# kernel's own DMA): only those blocks can be gathered.
_BLOCKED_SPACES = ("default", "vmem", "smem")

# XLA's CPU client takes a host array without copying it when it is aligned to this.
_ALIGNMENT = 64


@dataclass(frozen=True)
class _Slots:
    """One operand or output made compact: its distinct blocks (production starts and in-bounds
    sizes per dimension) and the slot of each sampled grid point."""

    starts: np.ndarray  # (slots, rank) production element offsets
    sizes: tuple[int, ...]  # the block's size per dimension (1 where squeezed)
    table: np.ndarray  # the slot of each point of the sampled grid, of the sampled grid's shape

    def compact_shape(self) -> tuple[int, ...]:
        return (len(self.starts) * self.sizes[0], *self.sizes[1:])

    def cut(self, slot: int, shape: Sequence[int]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """The in-bounds part of a slot's block: where it lies in the production array and in
        the compact one."""
        production, compact = [], []
        for axis, (start, size, extent) in enumerate(
            zip(self.starts[slot], self.sizes, shape, strict=True)
        ):
            kept = min(size, extent - int(start))
            production.append(slice(int(start), int(start) + kept))
            base = slot * size if axis == 0 else 0
            compact.append(slice(base, base + kept))
        return tuple(production), tuple(compact)


@dataclass(frozen=True)
class Compacted:
    """A sampled pallas_call bound over compact operands: the operands and parameters to bind,
    and how its results are placed back at production shape."""

    args: list[Any]
    params: dict[str, Any]
    outputs: list[tuple[_Slots | None, jax.ShapeDtypeStruct]]  # None: the output stays whole
    operand_bytes: int  # what the interpreter is handed (compact, or whole where it must be)
    output_bytes: int  # the interpreted call's outputs
    whole: tuple[str, ...]  # each operand or output left whole, and why

    def expand(self, results: Sequence[Any], uninitialized: Uninitialized) -> list[Any]:
        """The call's outputs at production shape: each slot at its production position, the
        rest uninitialised."""
        expanded = []
        for result, (slots, aval) in zip(results, self.outputs, strict=True):
            if slots is None:
                expanded.append(result)
                continue
            placed = _aligned_full(aval, get_uninitialized_value(aval.dtype, uninitialized))
            values = np.asarray(result)
            for slot in range(len(slots.starts)):
                production, compact = slots.cut(slot, aval.shape)
                placed[production] = values[compact]
            # on a CPU an aligned array is taken without a copy (production outputs are large)
            expanded.append(jax.device_put(placed, may_alias=True))
        return expanded

    def pick(self, results: Sequence[Any], number: int, region: Region) -> np.ndarray:
        """The values of output `number` in a `region` (production coordinates) that lies in
        one sampled block, read from the compact result without placing it at production
        shape (gigabytes on large tasks, for a few blocks)."""
        slots, _ = self.outputs[number]
        values = np.asarray(results[number])
        wanted = tuple(slice(start, start + size) for start, size in region)
        if slots is None:
            return values[wanted]
        first = np.array([start for start, _ in region])
        last = first + np.array([size for _, size in region])
        inside = (slots.starts <= first).all(axis=1) & (last <= slots.starts + slots.sizes).all(
            axis=1
        )
        if not inside.any():
            raise ValueError(f"region {region} lies in no sampled block")
        slot = int(np.argmax(inside))
        shift = slots.starts[slot] - np.array([slot * slots.sizes[0], *[0] * (len(region) - 1)])
        return values[tuple(slice(int(a - d), int(a - d) + n) for (a, n), d in zip(region, shift))]


def compact_call(
    name: str,
    original: Any,
    params: dict[str, Any],
    args: list[Any],
    points: np.ndarray,
    sampled_grid: tuple[int, ...],
    uninitialized: Uninitialized,
    placed_back: bool,
) -> Compacted:
    """The sampled call `name` (`params`, its grid `sampled_grid`) over compact operands.
    `original` is the production grid mapping; `points` the production grid point of each point
    of the sampled grid, in its row-major order; `placed_back`: its outputs will be placed at
    production shape (`Compacted.expand`), not only read by region (`Compacted.pick`). Refuses
    (NotSampleable) a run whose compact buffers (and placed outputs) do not fit."""
    mapping = params["grid_mapping"]
    scalars = mapping.num_index_operands
    index_operands = [np.asarray(a) for a in args[:scalars]]
    aliased_inputs = {i - scalars for i, _ in params["input_output_aliases"]}
    aliased_outputs = {o for _, o in params["input_output_aliases"]}
    blocks = list(mapping.block_mappings)
    new_args = list(args[:scalars])
    outputs: list[tuple[_Slots | None, jax.ShapeDtypeStruct]] = []
    whole: list[str] = []
    for number, (production, block) in enumerate(
        zip(original.block_mappings, mapping.block_mappings, strict=True)
    ):
        is_input = number < mapping.num_inputs
        aval = block.array_aval
        aliased = (aliased_inputs if is_input else aliased_outputs) >= {
            number if is_input else number - mapping.num_inputs
        }
        slots, why = _slots(production, points, index_operands, sampled_grid, aliased)
        if slots is None:
            whole.append(f"{production.origin} ({why})")
        else:
            blocks[number] = dataclasses.replace(
                block,
                array_aval=aval.update(shape=slots.compact_shape()),
                index_map_jaxpr=_slot_map(slots.table, mapping.index_map_avals, len(slots.sizes)),
                allow_captured_consts=True,
            )
        if is_input:
            operand = args[scalars + number]
            new_args.append(operand if slots is None else _gathered(operand, slots, uninitialized))
        else:
            outputs.append((slots, jax.ShapeDtypeStruct(aval.shape, aval.dtype)))
    out_avals = tuple(block.array_aval for block in blocks[mapping.num_inputs :])
    new_params = dict(
        params,
        grid_mapping=dataclasses.replace(mapping, block_mappings=tuple(blocks)),
        out_avals=out_avals,
    )
    operand_bytes = sum(_nbytes(a.shape, a.dtype) for a in new_args)
    output_bytes = sum(_nbytes(a.shape, a.dtype) for a in out_avals)
    placed = sum(
        _nbytes(a.shape, a.dtype) for slots, a in outputs if slots is not None and placed_back
    )
    problem = tiles_memory.compact_shortfall(
        name, operand_bytes + output_bytes, placed, tiles_memory.memory_room()
    )
    if problem is not None:
        raise NotSampleable(problem)
    return Compacted(new_args, new_params, outputs, operand_bytes, output_bytes, tuple(whole))


def _slots(
    block: Any,
    points: np.ndarray,
    index_operands: list[np.ndarray],
    sampled_grid: tuple[int, ...],
    aliased: bool,
) -> tuple[_Slots | None, str]:
    """The compact layout of one operand or output, or None and why it stays whole."""
    space = str(getattr(block.transformed_block_aval, "memory_space", None)).lower()
    kinds = [dim_kind(d) for d in block.block_shape]
    if not any(space.endswith(name) for name in _BLOCKED_SPACES):
        return None, f"memory space {space}: read by the kernel's own DMA"
    if aliased:
        return None, "aliased between an input and an output"
    if block.transforms:
        return None, "a transformed block"
    if not kinds or any(kind not in ("Blocked", "Squeezed") for kind in kinds):
        return None, "a block that is not made of Blocked and Squeezed dimensions"
    sizes = tuple(
        1 if kind == "Squeezed" else int(getattr(d, "block_size", d))
        for d, kind in zip(block.block_shape, kinds, strict=True)
    )
    indices = block_indices(block, points, index_operands)
    distinct, inverse = np.unique(indices, axis=0, return_inverse=True)
    shape = block.array_aval.shape
    # the interpreter pads an operand to whole blocks: a block starting past that fails there
    ends = np.array([math.ceil(e / s) for e, s in zip(shape, sizes, strict=True)])
    if (distinct < 0).any() or (distinct >= ends).any():
        return None, "a block index outside the array"
    starts = distinct * np.array(sizes, np.int64)
    return _Slots(starts, sizes, inverse.reshape(sampled_grid).astype(np.int32)), ""


def _gathered(operand: Any, slots: _Slots, uninitialized: Uninitialized) -> jax.Array:
    """The slots' blocks of an operand, stacked; a partial edge block padded with the value
    interpret mode pads an operand with."""
    source = np.asarray(operand)
    fill = get_uninitialized_value(source.dtype, uninitialized)
    compact = np.empty(slots.compact_shape(), source.dtype)  # filled only where padded: large
    for slot in range(len(slots.starts)):
        production, place = slots.cut(slot, source.shape)
        whole = (slice(slot * slots.sizes[0], (slot + 1) * slots.sizes[0]),)
        if any(cut.stop - cut.start < size for cut, size in zip(place, slots.sizes, strict=True)):
            compact[whole].fill(fill)
        compact[place] = source[production]
    return jnp.asarray(compact)


def _aligned_full(aval: jax.ShapeDtypeStruct, fill: Any) -> np.ndarray:
    """A host array of `aval` filled with `fill`, aligned as XLA's CPU buffers are."""
    size = _nbytes(aval.shape, aval.dtype)
    raw = np.empty(size + _ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % _ALIGNMENT
    array: np.ndarray = raw[start : start + size].view(aval.dtype).reshape(aval.shape)
    array.fill(fill)
    return array


def _slot_map(table: np.ndarray, index_avals: Sequence[Any], rank: int) -> Any:
    """An index map of the sampled grid returning (slot, 0, ...): the block at that slot."""
    sampled_rank = table.ndim

    def index_map(*ids: Any) -> list[Any]:
        slot = jnp.asarray(table)[tuple(ids[:sampled_rank])]
        return [slot, *[jnp.int32(0)] * (rank - 1)]

    return traced_index_map(index_map, list(index_avals))


def traced_index_map(index_map: Callable[..., Any], avals: list[Any]) -> Any:
    """An index map traced into the closed jaxpr a BlockMapping holds (captured constants
    kept as consts)."""
    debug = api_util.debug_info("sampled index_map", index_map, tuple(avals), {})
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(index_map, debug_info=debug), avals)
    return core.ClosedJaxpr(jaxpr, consts)


def _nbytes(shape: Sequence[int], dtype: Any) -> int:
    return math.prod(shape) * int(np.dtype(dtype).itemsize)
