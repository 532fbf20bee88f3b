"""What a program's Pallas kernels do at one set of shapes, as plain data. Imports jax.

For each `pallas_call` of a traced program: its MXU flops over the whole grid (a `scan` in the
body counts its length times, a `cond` (`pl.when`) its most expensive branch: an upper bound,
of which the flops under a branch are kept apart as conditional), whether that
count is exact (a `while` loop or scalar-prefetch index maps make the work data-dependent), the
kinds of operation its body uses and the operand types of its matmuls (what the body *is*, apart
from its sizes), and how much of each output its blocks cover over the grid. The heavy work left
to XLA outside the kernels comes from evaluation/work/jaxpr_work.py. The verdicts drawn from this
live in evaluation/work/production_checks.py, which does not import jax.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure
from maxkernel_tui.kernels.evaluation.work.production_checks import KernelWork, ProgramWork, Shapes
from maxkernel_tui.kernels.perf.jaxpr_walk import Branch, pallas_calls, walk

# Grids with more steps than this are not enumerated for output coverage.
MAX_COVERAGE_STEPS = 1 << 18
# Block-index bookkeeping of the pipeline, not work the body does.
_BOOKKEEPING = {"program_id", "num_programs", "pjit", "closed_call", "jit"}


def measure_shapes(
    config: str, candidate: Callable[..., Any], reference: Callable[..., Any], specs: Sequence[Any]
) -> Shapes:
    """The candidate's kernels and the reference's matmul flops, traced at `specs`."""
    work = program_work(jax.make_jaxpr(candidate)(*specs))
    reference_flops = measure(jax.make_jaxpr(reference)(*specs)).xla_flops
    input_bytes = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in specs)
    return Shapes(config, work, reference_flops, int(input_bytes))


def program_work(closed_jaxpr: Any) -> ProgramWork:
    """The Pallas kernels of a traced program and the flops XLA does around them."""
    kernels = [_kernel_work(site.eqn) for site in pallas_calls(closed_jaxpr.jaxpr)]
    return ProgramWork(kernels=kernels, xla_flops=measure(closed_jaxpr).xla_flops)


def _kernel_work(eqn: Any) -> KernelWork:
    grid_mapping = eqn.params["grid_mapping"]
    # a dynamic grid dimension (its size is data) counts as one step: a lower bound
    dynamic = [g for g in grid_mapping.grid if not isinstance(g, int)]
    grid = [g if isinstance(g, int) else 1 for g in grid_mapping.grid]
    steps = math.prod(grid) if grid else 1
    body = _body(eqn.params["jaxpr"])
    prefetch = bool(grid_mapping.num_index_operands) or bool(dynamic)
    blocks = _output_blocks(grid_mapping)
    return KernelWork(
        name=str(getattr(eqn.params["jaxpr"].debug_info, "func_name", None) or "kernel"),
        steps=steps,
        mxu_flops=body.mxu_flops * steps,
        conditional_flops=body.conditional_flops * steps,
        exact=not (body.data_dependent or prefetch),
        operations=sorted(body.operations),
        matmul_types=sorted(body.matmul_types),
        output_coverage=None if prefetch else _output_coverage(grid_mapping, blocks, grid, steps),
        output_blocks=tuple((tuple(block), tuple(array)) for block, array in blocks),
    )


@dataclass
class _Body:
    """What a kernel body does per grid step."""

    mxu_flops: float = 0.0
    conditional_flops: float = 0.0  # the part of mxu_flops under a cond branch
    data_dependent: bool = False
    operations: set[str] = field(default_factory=set)
    matmul_types: set[str] = field(default_factory=set)


def _body(jaxpr: Any) -> _Body:
    """A `scan` in the body counts its length times, a `cond` (`pl.when`) its most expensive
    branch."""
    body = _Body()
    flops: dict[tuple[Branch, ...], float] = {}  # matmul flops by the branches they sit under
    for site in walk(jaxpr):
        if site.name not in _BOOKKEEPING:
            body.operations.add(site.name)
        if site.name == "dot_general":
            flops[site.branches] = flops.get(site.branches, 0.0) + _dot(
                site.eqn, site.times, body.matmul_types
            )
        elif site.name == "while":
            body.data_dependent = True  # its trip count is not known statically
    body.conditional_flops = _most_expensive_branches(flops, ())
    body.mxu_flops = flops.get((), 0.0) + body.conditional_flops
    return body


def _dot(eqn: Any, times: int, matmul_types: set[str]) -> float:
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
    contracted: int = math.prod(lhs.shape[d] for d in lhs_contract)
    outputs: int = math.prod(eqn.outvars[0].aval.shape)
    matmul_types.add(f"{lhs.dtype} x {rhs.dtype} -> {eqn.outvars[0].aval.dtype}")
    return 2.0 * outputs * contracted * times


def _most_expensive_branches(
    flops: dict[tuple[Branch, ...], float], at: tuple[Branch, ...]
) -> float:
    """The flops under the conds held at branch path `at`: each cond's most expensive branch,
    with the conds that branch holds in turn."""
    depth = len(at)
    costs: dict[int, list[float]] = {}
    for cond, index in sorted(
        {path[depth] for path in flops if path[:depth] == at and len(path) > depth}
    ):
        inner = (*at, (cond, index))
        costs.setdefault(cond, []).append(
            flops.get(inner, 0.0) + _most_expensive_branches(flops, inner)
        )
    return sum((max(branch_costs) for branch_costs in costs.values()), 0.0)


def _output_blocks(grid_mapping: Any) -> list[tuple[list[int], list[int]]]:
    """Each output's block shape and array shape, in the order of the kernel's outputs."""
    outputs = grid_mapping.block_mappings[grid_mapping.num_inputs :]
    return [
        ([_block_size(d) for d in mapping.block_shape], [int(d) for d in mapping.array_aval.shape])
        for mapping in outputs
    ]


def _output_coverage(
    grid_mapping: Any, blocks: list[tuple[list[int], list[int]]], grid: list[int], steps: int
) -> float | None:
    """The smallest share of any blocked output that the grid's blocks write (1.0: all of it);
    None when it cannot be known (huge grid, outputs in HBM written by DMA)."""
    if steps > MAX_COVERAGE_STEPS or not grid:
        return None if grid else 1.0
    outputs = grid_mapping.block_mappings[grid_mapping.num_inputs :]
    points = jnp.asarray(np.stack(np.unravel_index(np.arange(steps), grid), axis=-1), jnp.int32)
    shares = []
    for mapping, (block, array) in zip(outputs, blocks, strict=True):
        if "any" in str(getattr(mapping.block_aval, "memory_space", "")).lower():
            return None
        indices = _block_indices(mapping.index_map_jaxpr, points, len(grid))
        shares.append(_covered_share(indices, block, array))
    return min(shares, default=1.0)


def _block_size(dim: Any) -> int:
    """A block dimension's size: an int, `Blocked(block_size=b)`, or 1 for a squeezed one."""
    if isinstance(dim, int):
        return dim
    return int(getattr(dim, "block_size", 1) or 1)


def _block_indices(closed: Any, points: jax.Array, rank: int) -> np.ndarray:
    def index_of(point: jax.Array) -> jax.Array:
        outs = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *[point[i] for i in range(rank)])
        return jnp.stack([jnp.asarray(o, jnp.int32) for o in outs])

    return np.asarray(jax.jit(jax.vmap(index_of))(points))


def _covered_share(indices: np.ndarray, block: list[int], array: list[int]) -> float:
    """Share of the array's elements inside at least one visited block (block index i of a
    dimension covers elements [i * b, (i + 1) * b))."""
    if len(block) != len(array) or indices.shape[1] != len(array):
        return 1.0  # an index map of another rank (element indexing): not judged
    blocks_per_dim = [max(1, -(-a // b)) for a, b in zip(array, block, strict=True)]
    visited = np.unique(np.clip(indices, 0, np.array(blocks_per_dim) - 1), axis=0)
    total = math.prod(blocks_per_dim)
    return len(visited) / total
