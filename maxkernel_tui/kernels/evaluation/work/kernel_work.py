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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.kernels.evaluation.work.jaxpr_work import measure
from maxkernel_tui.kernels.evaluation.work.production_checks import KernelWork, ProgramWork, Shapes
from maxkernel_tui.kernels.perf.jaxpr_walk import sub_jaxprs

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
    kernels: list[KernelWork] = []
    _collect(closed_jaxpr.jaxpr, kernels)
    return ProgramWork(kernels=kernels, xla_flops=measure(closed_jaxpr).xla_flops)


def _collect(jaxpr: Any, kernels: list[KernelWork]) -> None:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            kernels.append(_kernel_work(eqn))
            continue
        for sub in sub_jaxprs(eqn.params):
            _collect(sub, kernels)


def _kernel_work(eqn: Any) -> KernelWork:
    grid_mapping = eqn.params["grid_mapping"]
    # a dynamic grid dimension (its size is data) counts as one step: a lower bound
    dynamic = [g for g in grid_mapping.grid if not isinstance(g, int)]
    grid = [g if isinstance(g, int) else 1 for g in grid_mapping.grid]
    steps = math.prod(grid) if grid else 1
    body = _Body()
    body.walk(eqn.params["jaxpr"], 1.0)
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


class _Body:
    """Walks a kernel body once, counting per grid step."""

    def __init__(self) -> None:
        self.mxu_flops = 0.0
        self.conditional_flops = 0.0  # the part of mxu_flops under a cond branch
        self.data_dependent = False
        self.operations: set[str] = set()
        self.matmul_types: set[str] = set()

    def walk(self, jaxpr: Any, times: float) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name not in _BOOKKEEPING:
                self.operations.add(name)
            if name == "dot_general":
                self._dot(eqn, times)
            elif name == "cond":
                self._most_expensive_branch(eqn, times)
                continue
            elif name == "while":
                self.data_dependent = True  # its trip count is not known statically
            inner = times * int(eqn.params["length"]) if name == "scan" else times
            for sub in sub_jaxprs(eqn.params):
                self.walk(sub, inner)

    def _dot(self, eqn: Any, times: float) -> None:
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
        contracted = math.prod(lhs.shape[d] for d in lhs_contract)
        outputs = math.prod(eqn.outvars[0].aval.shape)
        self.mxu_flops += 2.0 * outputs * contracted * times
        self.matmul_types.add(f"{lhs.dtype} x {rhs.dtype} -> {eqn.outvars[0].aval.dtype}")

    def _most_expensive_branch(self, eqn: Any, times: float) -> None:
        costs = []
        for branch in eqn.params["branches"]:
            probe = _Body()
            probe.walk(branch.jaxpr, times)
            costs.append(probe.mxu_flops)
            self.data_dependent |= probe.data_dependent
            self.operations |= probe.operations
            self.matmul_types |= probe.matmul_types
        most = max(costs, default=0.0)
        self.mxu_flops += most
        self.conditional_flops += most


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
