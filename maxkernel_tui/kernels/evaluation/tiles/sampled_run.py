"""Sampled output tiles of a program's Pallas kernels, run at production shapes. Imports jax.

A full production run in TPU interpret mode is unaffordable on a CPU (a 4096x8192x8192 GEMM
with 512 tiles is 2048 grid steps of big blocks), so each `pallas_call` of the candidate's
program runs only a sample of its output blocks, with every reduction step of each:

  - the grid axes that choose an output block ("output axes") are found by evaluating the output
    index maps; the others are the reduction axes, run in full and in their order;
  - the kernel is bound again with grid `(sampled blocks, *reduction axes)`; its index maps are
    wrapped to map a sampled id to the production grid point, and the grid environment the
    interpreter gives the body (`GridMapping.local_grid_env`, the hook `vmap` of a pallas_call
    uses) reports the production `program_id` and `num_programs` for every axis;
  - the output buffers start uninitialised (NaN in TPU interpret mode), so a sampled block the
    body leaves unwritten reads NaN, and the blocks not sampled are never compared.

The sample is fresh for every evaluation and always holds the first and last block of each
output axis (every corner of the output grid, when there are at most eight). What each output
element of the whole program depends on is followed by running the XLA around the kernels a
second time with the sampled blocks finite and everything else NaN: the elements that come out
finite are those the sample decides (`SampledOutputs.decided`). The comparison with the
reference happens elsewhere (the harness), never in the process that runs the candidate.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import api_util
from jax._src import linear_util as lu
from jax._src.interpreters import partial_eval as pe
from jax._src.pallas import core as pallas_core
from jax._src.pallas.pallas_call import pallas_call_p
from jax.experimental.pallas import tpu as pltpu
from jax.extend import core
from jax.extend.core import Var

from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory
from maxkernel_tui.kernels.evaluation.work.jaxpr_work import value_bytes
from maxkernel_tui.kernels.perf.jaxpr_walk import pallas_calls, sub_jaxprs, walk

# Corners of the output grid always sampled while there are at most this many of them; above,
# the all-first and all-last blocks stand for them.
MAX_CORNERS = 8
# Output-axis points probed per axis to tell output axes from reduction axes.
_PROBES = 4
# The call primitives whose bodies are entered to find the kernels they hold.
_CALLS = ("pjit", "jit", "closed_call", "core_call")


class NotSampleable(Exception):
    """The program cannot be run by sampled tiles; the message says why."""


@dataclass(frozen=True)
class KernelSample:
    """One pallas_call's sampled run."""

    name: str
    grid: tuple[int, ...]  # the production grid
    output_axes: tuple[int, ...]
    blocks: int  # output blocks sampled
    of_blocks: int  # output blocks of the production grid
    steps: int  # grid steps run (sampled blocks times reduction steps)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.blocks} of {self.of_blocks} output blocks, "
            f"{self.steps} grid steps of grid {self.grid}"
        )


@dataclass(frozen=True)
class SampledOutputs:
    """The program's outputs at production shape where the sample decides them (elsewhere
    anything), and which elements those are."""

    outputs: list[Any]  # jax arrays
    decided: list[np.ndarray]  # bool, one per output
    kernels: list[KernelSample]

    @property
    def decided_elements(self) -> int:
        return int(sum(d.sum() for d in self.decided))


def run_sampled(
    closed_jaxpr: Any,
    inputs: Sequence[Any],
    rng: np.random.Generator,
    *,
    random_blocks: int,
    params: pltpu.InterpretParams,
) -> SampledOutputs:
    """Run a traced program on concrete inputs with every pallas_call reduced to a sample of its
    output blocks (TPU interpret mode), then follow which outputs the sample decides."""
    buffers = _kernel_buffers(closed_jaxpr.jaxpr)
    problem = tiles_memory.shortfall(buffers, tiles_memory.memory_room())
    if problem is not None:
        raise NotSampleable(problem)
    recorded: list[tuple[list[Any], list[list[_Region]]]] = []
    kernels: list[KernelSample] = []

    def sampled(eqn: Any, args: list[Any]) -> list[Any]:
        outputs, regions, sample = _run_kernel(eqn, args, rng, random_blocks, params)
        recorded.append((outputs, regions))
        kernels.append(sample)
        return outputs

    outputs = _evaluate(closed_jaxpr.jaxpr, closed_jaxpr.consts, list(inputs), sampled)
    if not kernels:
        raise NotSampleable("the program has no pallas_call outside control flow")
    replay = iter(recorded)

    def provenance(eqn: Any, args: list[Any]) -> list[Any]:
        outputs, regions = next(replay)
        # an input already undecided (another kernel's unsampled blocks) leaves this kernel's
        # outputs undecided: conservative, it never marks a wrong element as decided
        tainted = any(_has_nan(a) for a in args)
        return [_followed(out, () if tainted else tuple(r)) for out, r in zip(outputs, regions)]

    followed = _evaluate(closed_jaxpr.jaxpr, closed_jaxpr.consts, list(inputs), provenance)
    for output in outputs:
        _require_float(output, "a program output")
    decided = [np.asarray(_decided(f)) for f in followed]
    return SampledOutputs(list(outputs), decided, kernels)


def _evaluate(
    jaxpr: Any, consts: Sequence[Any], args: list[Any], on_kernel: Callable[..., Any]
) -> list[Any]:
    """Eager evaluation of a jaxpr, each pallas_call handed to `on_kernel`; calls (pjit) are
    entered. A pallas_call under other control flow cannot be sampled."""
    env: dict[Any, Any] = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, core.Literal) else env[atom]

    # production arrays are large: drop each value after its last use
    last_use = {v: i for i, e in enumerate(jaxpr.eqns) for v in e.invars if isinstance(v, Var)}
    kept = set(jaxpr.outvars)
    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for position, eqn in enumerate(jaxpr.eqns):
        invals = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        if name == "pallas_call":
            outvals = on_kernel(eqn, invals)
        elif name in _CALLS and _holds_kernel(eqn):
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            inner_consts = getattr(inner, "consts", ())
            outvals = _evaluate(getattr(inner, "jaxpr", inner), inner_consts, invals, on_kernel)
        elif _holds_kernel(eqn):
            raise NotSampleable(f"a pallas_call inside {name}")
        else:
            with eqn.ctx.manager:
                result = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
            outvals = result if eqn.primitive.multiple_results else [result]
        env.update(zip(eqn.outvars, outvals, strict=True))
        for var in eqn.invars:
            if isinstance(var, Var) and last_use.get(var) == position and var not in kept:
                env.pop(var, None)
    return [read(v) for v in jaxpr.outvars]


def _kernel_buffers(jaxpr: Any) -> list[tiles_memory.KernelBuffers]:
    """Each pallas_call `_evaluate` would run (calls entered), with its operand and output bytes
    at production shapes, in order."""
    return [
        tiles_memory.KernelBuffers(
            _kernel_name(site.eqn), value_bytes(site.eqn.invars), value_bytes(site.eqn.outvars)
        )
        for site in pallas_calls(jaxpr)
        if all(name in _CALLS for name in site.within)
    ]


def _kernel_name(eqn: Any) -> str:
    return str(getattr(eqn.params["jaxpr"].debug_info, "func_name", None) or "kernel")


def _holds_kernel(eqn: Any) -> bool:
    return any(site.name == "pallas_call" for sub in sub_jaxprs(eqn.params) for site in walk(sub))


# A region of an output: (start, size) per dimension, inside the array.
_Region = tuple[tuple[int, int], ...]


def _has_nan(value: Any) -> bool:
    return bool(jnp.issubdtype(value.dtype, jnp.floating) and _any_nan(value))


@jax.jit
def _any_nan(value: jax.Array) -> jax.Array:
    return jnp.isnan(value).any()


@jax.jit
def _decided(value: jax.Array) -> jax.Array:
    return ~jnp.isnan(value)


def _require_float(value: Any, what: str) -> None:
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise NotSampleable(f"{what} of type {value.dtype} (undecided elements need NaN)")


def _followed(output: jax.Array, regions: tuple[_Region, ...]) -> jax.Array:
    """The sampled regions finite (their own value, NaN read as 0), the rest NaN; in the
    output's own type, so the XLA after the kernel runs as it did."""
    _require_float(output, "a kernel output")
    filled: jax.Array = _fill_regions(output, regions)  # jitted: jax.jit's result is untyped
    return filled


@functools.partial(jax.jit, static_argnums=1)
def _fill_regions(output: jax.Array, regions: tuple[_Region, ...]) -> jax.Array:
    result = jnp.full(output.shape, jnp.nan, output.dtype)
    for region in regions:
        starts = [start for start, _ in region]
        block = jax.lax.dynamic_slice(output, starts, [size for _, size in region])
        block = jnp.nan_to_num(block, nan=0.0, posinf=0.0, neginf=0.0)
        result = jax.lax.dynamic_update_slice(result, block, starts)
    return result


# --- one kernel ---------------------------------------------------------------------------


def _run_kernel(
    eqn: Any,
    args: list[Any],
    rng: np.random.Generator,
    random_blocks: int,
    params: pltpu.InterpretParams,
) -> tuple[list[Any], list[list[_Region]], KernelSample]:
    mapping = eqn.params["grid_mapping"]
    grid = tuple(mapping.grid)
    if not all(isinstance(g, int) for g in grid):
        raise NotSampleable("a grid whose size is data (dynamic grid bounds)")
    if mapping.local_grid_env is not None:
        raise NotSampleable("a kernel with its own grid environment")
    index_operands = [np.asarray(a) for a in args[: mapping.num_index_operands]]
    outputs = mapping.block_mappings[mapping.num_inputs :]
    for block in outputs:
        if _in_any_space(block):
            raise NotSampleable("an output written by DMA (memory space ANY), not by blocks")
        if not all(_dim_kind(d) for d in block.block_shape):
            raise NotSampleable("an output block dimension of an unknown kind")
    output_axes = _output_axes(outputs, grid, index_operands)
    reduction_axes = tuple(a for a in range(len(grid)) if a not in output_axes)
    sample = sample_blocks(tuple(grid[a] for a in output_axes), rng, random_blocks)
    to_production = _ToProduction(grid, output_axes, reduction_axes, sample)
    new_params = _sampled_params(eqn.params, to_production)
    result = pallas_call_p.bind(*args, **dict(new_params, interpret=params))
    regions = [
        _written(block, to_production.points(), index_operands, tuple(out.shape))
        for block, out in zip(outputs, result, strict=True)
    ]
    name = _kernel_name(eqn)
    reduction = math.prod(grid[a] for a in reduction_axes)
    record = KernelSample(
        name,
        grid,
        output_axes,
        len(sample),
        math.prod(grid[a] for a in output_axes),
        len(sample) * reduction,
    )
    return list(result), regions, record


def sample_blocks(
    sizes: tuple[int, ...], rng: np.random.Generator, random_blocks: int
) -> np.ndarray:
    """Sampled points of an output grid of `sizes`, one row each: every corner (or the
    all-first and all-last ones when there are more than MAX_CORNERS), the first and last
    block of each axis, and `random_blocks` drawn at random, without repeats, in grid order."""
    if not sizes:
        return np.zeros((1, 0), np.int64)
    ends = [sorted({0, size - 1}) for size in sizes]
    corners = list(itertools.product(*ends))
    if len(corners) > MAX_CORNERS:
        corners = [tuple(0 for _ in sizes), tuple(size - 1 for size in sizes)]
    chosen = set(corners)
    total = math.prod(sizes)
    wanted = min(total, len(chosen) + random_blocks)
    while len(chosen) < wanted:
        chosen.add(tuple(int(rng.integers(size)) for size in sizes))
    return np.array(sorted(chosen), dtype=np.int64)


class _ToProduction:
    """Maps a point of the sampled grid `(s, *reduction ids)` to the production grid point."""

    def __init__(
        self,
        grid: tuple[int, ...],
        output_axes: tuple[int, ...],
        reduction_axes: tuple[int, ...],
        sample: np.ndarray,
    ) -> None:
        self.grid, self.output_axes, self.reduction_axes = grid, output_axes, reduction_axes
        self.sample = sample
        self.sampled_grid = (len(sample), *(grid[a] for a in reduction_axes))

    def point(self, sampled: Sequence[Any]) -> list[Any]:
        """Production ids (traced int32) of a sampled grid point."""
        production: list[Any] = [None] * len(self.grid)
        for column, axis in enumerate(self.output_axes):
            production[axis] = jnp.asarray(self.sample[:, column], jnp.int32)[sampled[0]]
        for position, axis in enumerate(self.reduction_axes, start=1):
            production[axis] = jnp.asarray(sampled[position], jnp.int32)
        return production

    def points(self) -> np.ndarray:
        """Every production grid point the sampled grid visits, in order."""
        rows = []
        for sampled in itertools.product(*(range(n) for n in self.sampled_grid)):
            row = [0] * len(self.grid)
            for column, axis in enumerate(self.output_axes):
                row[axis] = int(self.sample[sampled[0], column])
            for position, axis in enumerate(self.reduction_axes, start=1):
                row[axis] = sampled[position]
            rows.append(row)
        return np.array(rows, dtype=np.int32).reshape(len(rows), len(self.grid))


def _sampled_params(params: dict[str, Any], to_production: _ToProduction) -> dict[str, Any]:
    mapping = params["grid_mapping"]
    rank = len(to_production.grid)
    index_avals = mapping.index_map_avals[rank:]

    def grid_env(point: Any, _sampled_grid: Any) -> tuple[pallas_core.GridAxis, ...]:
        production = to_production.point([point[i] for i in range(len(point))])
        return tuple(
            pallas_core.GridAxis(production[axis], to_production.grid[axis])
            for axis in range(rank)
            if axis not in mapping.vmapped_dims
        )

    blocks = tuple(
        dataclasses.replace(
            block,
            index_map_jaxpr=_wrapped_index_map(block.index_map_jaxpr, to_production, index_avals),
            allow_captured_consts=True,
        )
        for block in mapping.block_mappings
    )
    sampled_rank = len(to_production.sampled_grid)
    new_mapping = dataclasses.replace(
        mapping,
        grid=to_production.sampled_grid,
        grid_names=None,
        block_mappings=blocks,
        index_map_avals=(*[jax.core.ShapedArray((), jnp.int32)] * sampled_rank, *index_avals),
        index_map_tree=jax.tree_util.tree_structure(
            (*range(sampled_rank), *range(len(index_avals)))
        ),
        vmapped_dims=(),
        local_grid_env=grid_env,
    )
    return dict(
        params,
        grid_mapping=new_mapping,
        compiler_params=_sequential(params.get("compiler_params"), sampled_rank),
    )


def _wrapped_index_map(closed: Any, to_production: _ToProduction, index_avals: Any) -> Any:
    sampled_rank = len(to_production.sampled_grid)

    def index_map(*args: Any) -> list[Any]:
        production = to_production.point(args[:sampled_rank])
        return jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *production, *args[sampled_rank:])

    avals = [jax.core.ShapedArray((), jnp.int32)] * sampled_rank + list(index_avals)
    debug = api_util.debug_info("sampled index_map", index_map, tuple(avals), {})
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(index_map, debug_info=debug), avals)
    return core.ClosedJaxpr(jaxpr, consts)


def _sequential(compiler_params: Any, rank: int) -> Any:
    """The kernel's compiler parameters with every sampled axis run in order ('arbitrary'):
    the interpreter would otherwise shuffle the sampled blocks, which changes nothing but the
    order of work."""
    if isinstance(compiler_params, dict):
        return {backend: _sequential(value, rank) for backend, value in compiler_params.items()}
    if (
        dataclasses.is_dataclass(compiler_params)
        and not isinstance(compiler_params, type)
        and hasattr(compiler_params, "dimension_semantics")
    ):
        return dataclasses.replace(compiler_params, dimension_semantics=("arbitrary",) * rank)
    return compiler_params


# --- which axes choose an output block, and which elements the sample writes ---------------


def _in_any_space(block: Any) -> bool:
    space = str(getattr(block.transformed_block_aval, "memory_space", "")).lower()
    return "any" in space or "hbm" in space


def _dim_kind(dim: Any) -> str | None:
    for kind in ("Blocked", "Squeezed", "Element"):
        if type(dim).__name__ == kind:
            return kind
    return "Blocked" if isinstance(dim, int) else None


def _output_axes(
    outputs: Sequence[Any], grid: tuple[int, ...], index_operands: list[np.ndarray]
) -> tuple[int, ...]:
    """Grid axes along which some output's block index changes (probed at a few points of every
    other axis)."""
    axes = []
    for axis, size in enumerate(grid):
        if size == 1:
            continue
        bases = [np.zeros(len(grid), np.int32), np.array([g - 1 for g in grid], np.int32)]
        moved = False
        for base in bases:
            points = np.repeat(base[None, :], size, axis=0)
            points[:, axis] = np.arange(size)
            for block in outputs:
                indices = _block_indices(block, points, index_operands)
                if (indices != indices[0]).any():
                    moved = True
        if moved:
            axes.append(axis)
    return tuple(axes)


def _block_indices(block: Any, points: np.ndarray, index_operands: list[np.ndarray]) -> np.ndarray:
    closed = block.index_map_jaxpr

    def index_of(point: jax.Array) -> jax.Array:
        ids = [point[i] for i in range(points.shape[1])]
        outs = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *ids, *index_operands)
        return jnp.stack([jnp.asarray(o, jnp.int32) for o in outs])

    return np.asarray(jax.jit(jax.vmap(index_of))(jnp.asarray(points, jnp.int32)))


def _written(
    block: Any, points: np.ndarray, index_operands: list[np.ndarray], shape: tuple[int, ...]
) -> list[_Region]:
    """The regions of an output inside a block visited at the sampled grid points (a partial
    last block cut at the array's end)."""
    regions = []
    for index in np.unique(_block_indices(block, points, index_operands), axis=0):
        region = []
        for i, dim, extent in zip(index, block.block_shape, shape, strict=True):
            kind = _dim_kind(dim)
            size = 1 if kind == "Squeezed" else dim if isinstance(dim, int) else dim.block_size
            start = int(i) * int(size) if kind == "Blocked" else int(i)
            start = min(max(start, 0), extent)
            region.append((start, min(int(size), extent - start)))
        if all(size > 0 for _, size in region):
            regions.append(tuple(region))
    return regions
