"""No state across output blocks: a sampled kernel run twice, once with its scratch and outputs
flowing from one sampled block to the next (as they would on one core) and once with them
overwritten with poison when each sampled block begins; the two must agree bit for bit. Imports
jax.

On a TPU the grid's parallel axes are split across cores, so what a body leaves in scratch (VMEM,
SMEM) or in its output buffers for the next output block is undefined there; a sample of blocks
cannot see a kernel that reads it (a counter that skips the work from the 16th block on is exact
in any sample of fewer). The poison is chosen per block from its production coordinates and a
seed, and cycles through NaN (the largest integer), large finite values and random moderate
values, so a kernel cannot recognise "the poison" and behave only then; the natural run gives
each block what another block left. The values returned are the poisoned run's: each block
computed from its own inputs alone, which is what every core split can rely on; they equal the
natural run's whenever this check passes, and the harness compares them with the reference.

The natural run need not repeat every sampled block: for every class of output blocks
(classes.py: blocks of a class take the same branches) it runs two of its sampled blocks one
after the other, classes one after another, so every class is seen starting from what a block
of its own class left, and from poison. Its blocks are compared with the same blocks of the
poisoned run. A kernel whose control depends on data (not classed: a branch on what scratch
holds is one) gets the natural run of the whole sample, in order.

Where an output axis is declared `arbitrary` and the state along it is the algorithm (a chunked
scan writing one block per chunk), a sampled block depends on the blocks before it along that
axis: its prefix is run, in order, poisoned only where each sequence begins, when it fits a
budget of grid steps; else the kernel is `checked at small shapes only`, saying why.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import api_util
from jax._src import linear_util as lu
from jax._src.interpreters import partial_eval as pe
from jax._src.pallas import core as pallas_core
from jax.experimental import pallas as pl

from maxkernel_tui.kernels.evaluation.tiles.blocks import Region, written
from maxkernel_tui.kernels.evaluation.tiles.faults import KernelFault, NotSampleable
from maxkernel_tui.kernels.report.reasons import Reason

# Grid steps the prefixes of sampled blocks along `arbitrary` output axes may take in all
# (each prefix run twice); above, the kernel is checked at small shapes only.
PREFIX_STEPS = 2048


class Poison(IntEnum):
    """What a sampled block's scratch and outputs hold when it begins (the value is the code
    the poisoned body selects on)."""

    NAN = 0  # NaN; the largest value of an integer type; True
    LARGE = 1  # large finite values: a quarter of the float maximum; the integer minimum
    RANDOM = 2  # random moderate values: [-1, 1) floats, integers in [-1000, 1000]


@dataclass(frozen=True)
class Plan:
    """The sampled blocks (production coordinates along the output axes) poisoned when they
    begin, each with its pattern and the salt of its random values."""

    blocks: np.ndarray  # (n, len(output_axes))
    patterns: tuple[Poison, ...]
    salts: tuple[int, ...]

    @classmethod
    def of(cls, blocks: np.ndarray, seed: int) -> Plan:
        """Patterns in turn from a seeded start (every pattern among three blocks or more)."""
        draw = np.random.default_rng(seed)
        start = int(draw.integers(len(Poison)))
        patterns = tuple(Poison((start + row) % len(Poison)) for row in range(len(blocks)))
        salts = tuple(int(s) for s in draw.integers(2**32, size=len(blocks)))
        return cls(blocks, patterns, salts)


@dataclass(frozen=True)
class Kernel:
    """What the check needs of one pallas_call: its body and grid, which axes choose an output
    block, and how to find the regions a block writes."""

    body: Any  # the kernel body's jaxpr
    mapping: Any  # its GridMapping
    grid: tuple[int, ...]
    output_axes: tuple[int, ...]
    reduction_axes: tuple[int, ...]
    index_operands: list[np.ndarray]
    compiler_params: Any


@dataclass(frozen=True)
class Ran:
    """One run's outputs as the interpreted call returned them (compact: its slots), the same
    placed at production shape, and the values of one output in one region of a sampled block
    (output number, region) read without placing them."""

    values: list[Any]
    expand: Callable[[], list[Any]]
    pick: Callable[[int, Region], np.ndarray]


# Runs the kernel on sampled output blocks, poisoned by a plan or not.
Runner = Callable[[np.ndarray, Plan | None], Ran]


def stateless_run(
    kernel: Kernel,
    run: Runner,
    sample: np.ndarray,
    seed: int,
    classes: np.ndarray | None,
    visits: np.ndarray | None = None,
) -> tuple[np.ndarray, Ran]:
    """The blocks run (the sample, or the prefixes it needs along `arbitrary` output axes) and
    their poisoned run, once it agrees with the natural one. `classes`: the class of each
    sampled block, or None where the kernel's control is not classed (the whole sample then
    runs naturally too). `visits`: the visit of each sampled block (classes.Control.visits):
    the blocks of one visit keep their outputs resident, so they run together and are poisoned
    only where the visit begins; None: every block its own visit."""
    sequence = sequence_columns(kernel)
    if visits is None:
        visits = np.arange(len(sample))
    plan = Plan.of(sample[_visit_starts(visits)], seed)
    followers = sample if classes is None else sample[natural_rows(classes, visits)]
    poisoned = run(sample, plan)
    natural = run(followers, None)
    found = _differing_block(kernel, followers, natural, poisoned)
    if found is None:
        return sample, poisoned
    if not sequence:
        raise _carried(kernel, followers[found[0]], found[1], plan)
    sizes = tuple(kernel.grid[a] for a in kernel.output_axes)
    blocks = _prefixes(sample, sizes, sequence)
    steps = 2 * len(blocks) * math.prod(kernel.grid[a] for a in kernel.reduction_axes)
    if steps > PREFIX_STEPS:
        axes = ", ".join(str(kernel.output_axes[c]) for c in sequence)
        raise NotSampleable(
            f"state carried along the arbitrary grid axes {axes}: the sampled blocks depend on "
            f"the blocks before them, {steps} grid steps to run (budget {PREFIX_STEPS})"
        )
    starts = blocks[(blocks[:, list(sequence)] == 0).all(axis=1)]
    plan = Plan.of(starts, seed)
    natural, poisoned = run(blocks, None), run(blocks, plan)
    found = _differing_block(kernel, blocks, natural, poisoned)
    if found is not None:
        raise _carried(kernel, blocks[found[0]], found[1], plan)
    return blocks, poisoned


def _visit_starts(visits: np.ndarray) -> np.ndarray:
    """Rows (in grid order) where a visit begins."""
    return np.flatnonzero(np.concatenate([[True], visits[1:] != visits[:-1]]))


def natural_rows(classes: np.ndarray, visits: np.ndarray | None = None) -> np.ndarray:
    """Rows of the sample the natural run holds, in the order it runs them: class by class (in
    order of first appearance; a visit's class is its first block's), the first two visits of
    each, whole, so every class with two sampled visits is seen following a visit of its own
    class, and every class but the first following one of another."""
    if visits is None:
        visits = np.arange(len(classes))
    rows_of: dict[int, list[int]] = {}
    for row, visit in enumerate(visits.tolist()):
        rows_of.setdefault(int(visit), []).append(row)
    members: dict[int, list[int]] = {}
    for visit, rows in rows_of.items():
        members.setdefault(int(classes[rows[0]]), []).append(visit)
    order = [row for visits_of in members.values() for v in visits_of[:2] for row in rows_of[v]]
    return np.array(order, dtype=np.int64)


def poisoned_body(kernel: Kernel, plan: Plan) -> Any:
    """The kernel body, preceded at the first reduction step of every planned block by its
    poison written over every scratch and output ref. `program_id` in the body is the
    production one (the sampled run's grid environment)."""
    body, mapping = kernel.body, kernel.mapping
    first_poisoned = mapping.num_index_operands + mapping.num_inputs

    def wrapper(*refs: Any) -> list[Any]:
        first = functools.reduce(
            jnp.logical_and, [pl.program_id(a) == 0 for a in kernel.reduction_axes], jnp.bool_(True)
        )
        ids = [pl.program_id(a) for a in kernel.output_axes]
        chosen, salt = jnp.int32(-1), jnp.uint32(0)
        for block, pattern, block_salt in zip(plan.blocks, plan.patterns, plan.salts, strict=True):
            here = functools.reduce(
                jnp.logical_and,
                [i == int(c) for i, c in zip(ids, block, strict=True)],
                jnp.bool_(True),
            )
            chosen = jnp.where(here, jnp.int32(int(pattern)), chosen)
            salt = jnp.where(here, jnp.uint32(block_salt), salt)

        @pl.when(first & (chosen >= 0))
        def _poison() -> None:
            for ref in refs[first_poisoned:]:
                value = _poison_value(tuple(ref.shape), ref.dtype, chosen, salt)
                if value is not None:
                    ref[...] = value

        return jax.core.eval_jaxpr(body, (), *refs)

    avals = [var.aval for var in body.invars]
    debug = api_util.debug_info("poisoned kernel", wrapper, tuple(avals), {})
    with pallas_core.tracing_grid_env(kernel.grid, ()):
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(wrapper, debug_info=debug), avals)
    if consts:
        raise NotSampleable("a kernel body whose poisoned form needs constants")
    return jaxpr.replace(debug_info=body.debug_info)


def _poison_value(shape: tuple[int, ...], dtype: Any, chosen: Any, salt: Any) -> Any:
    """A ref's poison for the chosen pattern; None for a ref that holds no numbers
    (semaphores)."""
    bits = _hashed(shape, salt)
    if jnp.issubdtype(dtype, jnp.floating):
        unit = (bits >> 8).astype(jnp.float32) * (2.0 / 2**24) - 1.0
        nan, large = jnp.nan, float(jnp.finfo(dtype).max) / 4
        random = unit.astype(dtype)
    elif jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        nan, large = int(info.max), int(info.min) if info.min < 0 else int(info.max) // 2
        random = ((bits % 2001).astype(jnp.int32) - 1000).astype(dtype)
    elif jnp.issubdtype(dtype, jnp.bool_):
        nan, large, random = True, False, (bits & 1) == 1
    else:
        return None
    return jnp.where(
        chosen == Poison.NAN,
        jnp.full(shape, nan, dtype),
        jnp.where(chosen == Poison.LARGE, jnp.full(shape, large, dtype), random),
    )


def _hashed(shape: tuple[int, ...], salt: Any) -> Any:
    """Well-mixed uint32 bits per element (the lowbias32 integer hash of index and salt)."""
    index = jnp.full(shape, salt, jnp.uint32)
    stride = 1
    for dim in reversed(range(len(shape))):
        index = index + jax.lax.broadcasted_iota(jnp.uint32, shape, dim) * jnp.uint32(stride)
        stride *= shape[dim]
    x = index
    x = (x ^ (x >> 16)) * jnp.uint32(0x7FEB352D)
    x = (x ^ (x >> 15)) * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def sequence_columns(kernel: Kernel) -> tuple[int, ...]:
    """Columns of the sample (positions in output_axes) whose grid axis is `arbitrary`: run in
    order on one core, so state along it is defined. Undeclared semantics are arbitrary."""
    return tuple(
        column
        for column, axis in enumerate(kernel.output_axes)
        if in_order(kernel.compiler_params, (axis,))
    )


def in_order(compiler_params: Any, axes: Sequence[int]) -> bool:
    """Whether every one of the grid `axes` is `arbitrary` (or undeclared): run in order on one
    core, never split across cores."""
    semantics = _dimension_semantics(compiler_params)
    return semantics is None or all("arbitrary" in str(semantics[a]).lower() for a in axes)


def _dimension_semantics(compiler_params: Any) -> Sequence[Any] | None:
    if isinstance(compiler_params, dict):
        for value in compiler_params.values():
            found = _dimension_semantics(value)
            if found is not None:
                return found
        return None
    semantics: Sequence[Any] | None = getattr(compiler_params, "dimension_semantics", None)
    return semantics


def _prefixes(sample: np.ndarray, sizes: tuple[int, ...], sequence: tuple[int, ...]) -> np.ndarray:
    """Every block up to each sampled one along the sequence columns (in grid order, the other
    columns held), without repeats, in grid order."""
    seq_sizes = tuple(sizes[c] for c in sequence)
    rows = set()
    for block in sample:
        last = int(np.ravel_multi_index(tuple(int(block[c]) for c in sequence), seq_sizes))
        for position in range(last + 1):
            row = [int(v) for v in block]
            for column, value in zip(sequence, np.unravel_index(position, seq_sizes), strict=True):
                row[column] = int(value)
            rows.add(tuple(row))
    return np.array(sorted(rows), dtype=np.int64).reshape(len(rows), len(sizes))


def _differing_block(
    kernel: Kernel, blocks: np.ndarray, natural_run: Ran, poisoned_run: Ran
) -> tuple[int, int] | None:
    """(row of `blocks`, output) of the first of `blocks` (all run naturally; the poisoned run
    holds them and perhaps more) whose outputs differ between the runs."""
    # equal compact outputs of the same blocks hold equal blocks; unequal ones may differ only in
    # the padding of an edge block, outside the output: the regions each block writes are
    # compared then, as they are when the poisoned run holds more blocks
    same_blocks = [v.shape for v in natural_run.values] == [v.shape for v in poisoned_run.values]
    if same_blocks and all(_equal(natural_run.values, poisoned_run.values)):
        return None
    outputs = kernel.mapping.block_mappings[kernel.mapping.num_inputs :]
    for row, block in enumerate(blocks):
        point = np.zeros((1, len(kernel.grid)), np.int32)
        point[0, list(kernel.output_axes)] = block
        for number, mapping in enumerate(outputs):
            shape = tuple(mapping.array_aval.shape)
            for region in written(mapping, point, kernel.index_operands, shape):
                a, b = natural_run.pick(number, region), poisoned_run.pick(number, region)
                if not bool(_same(a, b)):
                    return row, number
    return None  # they differ only in the padding of edge blocks, outside the output


def _carried(kernel: Kernel, at: np.ndarray, output: int, plan: Plan) -> KernelFault:
    block = tuple(int(v) for v in at)
    planned = {tuple(int(v) for v in b): p for b, p in zip(plan.blocks, plan.patterns)}
    pattern = planned.get(block)
    started = f"started from {pattern.name} poison" if pattern else "followed a poisoned block"
    return KernelFault(
        Reason.TILES_STATE_CARRIED,
        f"output {output} of output block {block} (grid axes {kernel.output_axes}) differs when "
        f"it {started} and when it follows the previous sampled block",
    )


def _equal(a: list[Any], b: list[Any]) -> list[bool]:
    return [bool(_same(x, y)) for x, y in zip(a, b, strict=True)]


@jax.jit
def _same(a: jax.Array, b: jax.Array) -> jax.Array:
    """Bit for bit equal, NaN equal to NaN whatever its bits."""
    if jnp.issubdtype(a.dtype, jnp.floating):
        width = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64, 1: jnp.uint8}[a.dtype.itemsize]
        bits = jax.lax.bitcast_convert_type(a, width) == jax.lax.bitcast_convert_type(b, width)
        return (bits | (jnp.isnan(a) & jnp.isnan(b))).all()
    return (a == b).all()
