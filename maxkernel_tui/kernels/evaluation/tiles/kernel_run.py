"""One pallas_call run on a sample of its output blocks at production shapes, in TPU interpret
mode (see sampled_run.py for the program around it). Imports jax.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.pallas import core as pallas_core
from jax._src.pallas.pallas_call import pallas_call_p
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.kernels.evaluation.tiles import classes, poison
from maxkernel_tui.kernels.evaluation.tiles.blocks import (
    Region,
    dim_kind,
    in_any_space,
    written,
)
from maxkernel_tui.kernels.evaluation.tiles.compact import compact_call, traced_index_map
from maxkernel_tui.kernels.evaluation.tiles.faults import NotSampleable
from maxkernel_tui.kernels.evaluation.tracer.mxu_numerics import interpreted_kernel


@dataclass(frozen=True)
class KernelSample:
    """One pallas_call's sampled run."""

    name: str
    grid: tuple[int, ...]  # the production grid
    output_axes: tuple[int, ...]
    blocks: int  # output blocks sampled
    of_blocks: int  # output blocks of the production grid
    steps: int  # grid steps run (sampled blocks times reduction steps)
    classes: int = 1  # classes of output blocks by the kernel's scalar control (classes.py)
    on_data: int = 0  # branches, selects and loops on data (or too long to follow): not classed
    whole: tuple[str, ...] = ()  # operands handed to the interpreter whole, and why (compact.py)
    # the blocks run (rows of output-axis ids): the sample, or the prefixes it grew to along
    # `arbitrary` output axes (poison.stateless_run)
    ran: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros((0, 0), np.int64), compare=False
    )
    # the chain of each block run: blocks of one chain ran in grid order and may carry state
    # from earlier to later ones (one resident visit; the prefix of one sequence); empty: each
    # block its own
    chains: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros(0, np.int64), compare=False
    )

    def describe(self) -> str:
        branches = "branch" if self.on_data == 1 else "branches"
        unclassed = f", {self.on_data} {branches} on data (or not followed) not classed"
        kinds = "class" if self.classes == 1 else "classes"
        whole = f"; whole, not compact: {', '.join(self.whole)}" if self.whole else ""
        return (
            f"{self.name}: {self.blocks} of {self.of_blocks} output blocks covering "
            f"{self.classes} {kinds}{unclassed if self.on_data else ''}, "
            f"{self.steps} grid steps of grid {self.grid}{whole}"
        )


def kernel_name(eqn: Any) -> str:
    return str(getattr(eqn.params["jaxpr"].debug_info, "func_name", None) or "kernel")


def run_kernel(
    eqn: Any,
    args: list[Any],
    rng: np.random.Generator,
    random_blocks: int,
    params: pltpu.InterpretParams,
    required: np.ndarray | None = None,
    placed_back: bool = True,
) -> tuple[poison.Ran, list[list[Region]], KernelSample]:
    """The kernel's run on a sample of its output blocks (compact; `Ran.expand` places it at
    production shape), the regions of each output the sampled blocks write, and what was run.
    `required`: output blocks (rows of output-axis ids) the sample must hold (those a later
    kernel's sample reads, sampled_run.py); `placed_back`: whether the caller will place the
    outputs at production shape (for the memory check)."""
    mapping = eqn.params["grid_mapping"]
    grid = tuple(mapping.grid)
    index_operands = [np.asarray(a) for a in args[: mapping.num_index_operands]]
    outputs = mapping.block_mappings[mapping.num_inputs :]
    control, sample = choose_blocks(eqn, index_operands, rng, random_blocks, required)
    output_axes = control.output_axes
    reduction_axes = tuple(a for a in range(len(grid)) if a not in output_axes)
    name = kernel_name(eqn)
    kernel = poison.Kernel(
        eqn.params["jaxpr"],
        mapping,
        grid,
        output_axes,
        reduction_axes,
        index_operands,
        eqn.params.get("compiler_params"),
    )
    whole: list[tuple[str, ...]] = []

    def run(blocks: np.ndarray, plan: poison.Plan | None) -> poison.Ran:
        to_production = ToProduction(grid, output_axes, reduction_axes, blocks)
        new_params = _sampled_params(eqn.params, to_production)
        if plan is not None:
            new_params["jaxpr"] = poison.poisoned_body(kernel, plan)
        compacted = compact_call(
            name,
            mapping,
            new_params,
            args,
            to_production.points(),
            to_production.sampled_grid,
            params.uninitialized_memory,
            placed_back,
        )
        whole.append(compacted.whole)
        result = pallas_call_p.bind(*compacted.args, **interpreted_kernel(compacted.params, params))
        return poison.Ran(
            list(result),
            lambda: compacted.expand(result, params.uninitialized_memory),
            lambda number, region: compacted.pick(result, number, region),
        )

    # scratch and outputs poisoned between sampled blocks; the blocks run may grow to the
    # prefixes the sample needs along `arbitrary` output axes
    sampled_classes = sampled_visits = None
    if output_axes:
        flat = np.ravel_multi_index(sample.T, tuple(grid[a] for a in output_axes))
        if not control.on_data:
            sampled_classes = control.classes[flat]
        if control.visits is not None:
            sampled_visits = control.visits[flat]
    planned = sample
    sample, ran = poison.stateless_run(
        kernel, run, sample, int(rng.integers(2**31)), sampled_classes, sampled_visits
    )
    to_production = ToProduction(grid, output_axes, reduction_axes, sample)
    regions = [
        written(block, to_production.points(), index_operands, tuple(out.aval.shape))
        for block, out in zip(outputs, eqn.outvars, strict=True)
    ]
    reduction = math.prod(grid[a] for a in reduction_axes)
    record = KernelSample(
        name,
        grid,
        output_axes,
        _visits_held(control, sample, grid),
        control.visit_count(),
        len(sample) * reduction,
        control.count,
        control.on_data,
        whole[-1],
        sample,
        _chains(kernel, planned, sample, sampled_visits),
    )
    return ran, regions, record


def _chains(
    kernel: poison.Kernel, planned: np.ndarray, ran: np.ndarray, visits: np.ndarray | None
) -> np.ndarray:
    """The chain of each block run (KernelSample.chains): grown to prefixes, the blocks that
    share every column but the `arbitrary` ones; else the sample's visits."""
    if ran.shape == planned.shape and np.array_equal(ran, planned):
        return np.arange(len(ran)) if visits is None else visits
    others = [c for c in range(ran.shape[1]) if c not in poison.sequence_columns(kernel)]
    if not others:
        return np.zeros(len(ran), np.int64)
    _, chains = np.unique(ran[:, others], axis=0, return_inverse=True)
    return chains.reshape(-1)


def _visits_held(control: classes.Control, sample: np.ndarray, grid: tuple[int, ...]) -> int:
    """Output blocks (visits: points that keep them resident count once) the sample holds."""
    if control.visits is None or not control.output_axes:
        return len(sample)
    flat = np.ravel_multi_index(sample.T, tuple(grid[a] for a in control.output_axes))
    return len(np.unique(control.visits[flat]))


def choose_blocks(
    eqn: Any,
    index_operands: list[np.ndarray],
    rng: np.random.Generator,
    random_blocks: int,
    required: np.ndarray | None = None,
) -> tuple[classes.Control, np.ndarray]:
    """The kernel's output blocks by class (with the grid axes that choose an output block) and
    the sampled blocks (rows of ids along those axes), covering every class, `required` among
    them; raises NotSampleable for a kernel that cannot be sampled, KernelFault for one that
    revisits an output block."""
    mapping = eqn.params["grid_mapping"]
    grid = tuple(mapping.grid)
    if not all(isinstance(g, int) for g in grid):
        raise NotSampleable("a grid whose size is data (dynamic grid bounds)")
    if mapping.local_grid_env is not None:
        raise NotSampleable("a kernel with its own grid environment")
    outputs = mapping.block_mappings[mapping.num_inputs :]
    for block in outputs:
        if in_any_space(block):
            raise NotSampleable("an output written by DMA (memory space ANY), not by blocks")
        if not all(dim_kind(d) for d in block.block_shape):
            raise NotSampleable("an output block dimension of an unknown kind")
    name = kernel_name(eqn)
    control = classes.evaluate(eqn, index_operands, name)
    if not poison.in_order(eqn.params.get("compiler_params"), control.output_axes):
        # a block kept resident along an axis cores may split is undefined: each point its own
        control = dataclasses.replace(control, visits=None)
    sizes = tuple(grid[a] for a in control.output_axes)
    return control, classes.cover(sizes, control, rng, random_blocks, name, required=required)


class ToProduction:
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


def _sampled_params(params: dict[str, Any], to_production: ToProduction) -> dict[str, Any]:
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


def _wrapped_index_map(closed: Any, to_production: ToProduction, index_avals: Any) -> Any:
    sampled_rank = len(to_production.sampled_grid)

    def index_map(*args: Any) -> list[Any]:
        production = to_production.point(args[:sampled_rank])
        return jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *production, *args[sampled_rank:])

    avals = [jax.core.ShapedArray((), jnp.int32)] * sampled_rank + list(index_avals)
    return traced_index_map(index_map, avals)


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
