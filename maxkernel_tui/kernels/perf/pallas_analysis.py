"""Static analysis of the Pallas kernels in a program, from its jaxpr. Imports jax.

For each `pallas_call`: the grid, every block (shape, dtype, memory space, bytes), scratch
buffers, dimension semantics, the VMEM footprint with the pipeline's double buffers, HBM bytes
moved (a block is fetched again only when its block index changes between consecutive grid
steps, which we find by evaluating the index maps over the whole grid, index_maps.py), and the
work per grid step from the kernel body (MXU flops of matmuls, vector element operations,
transcendentals). Nothing here runs the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jax import tree_util

from maxkernel_tui.kernels.perf.analysis import Block, KernelAnalysis, MemorySpace
from maxkernel_tui.kernels.perf.flat_program import ScalarOperands
from maxkernel_tui.kernels.perf.index_maps import block_indices, branch_shares
from maxkernel_tui.kernels.perf.jaxpr_walk import pallas_calls, walk
from maxkernel_tui.kernels.perf.primitive_names import AXIS_REDUCTIONS

# Grids larger than this are not enumerated: every block is assumed fetched at every step.
MAX_ENUMERATED_STEPS = 1 << 20

_TRANSCENDENTAL = {
    "exp",
    "exp2",
    "log",
    "log1p",
    "tanh",
    "logistic",
    "sin",
    "cos",
    "rsqrt",
    "sqrt",
    "pow",
    "erf",
    "erf_inv",
    "atan2",
    "expm1",
    "cbrt",
}
_VECTOR = {
    "add",
    "sub",
    "mul",
    "div",
    "max",
    "min",
    "neg",
    "abs",
    "select_n",
    "convert_element_type",
    "integer_pow",
    "square",
    "sign",
    "floor",
    "ceil",
    "round",
    "rem",
    "and",
    "or",
    "xor",
    "not",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "broadcast_in_dim",
    "iota",
    "clamp",
    "nextafter",
    "shift_left",
    "shift_right_logical",
    "shift_right_arithmetic",
}


# Element operations a value read, written or sliced at a lane offset that is not a multiple of
# 128 (or a sublane offset not a multiple of 8) costs per element: its vregs rotated and
# merged (fitted to a convolution's patch of nine shifted slices, benchmarks/mxu_rows.py on
# v5e: 2.4 with 8 channels, 2.6 with 64).
LANE_SHIFT_OPS = 2.5
LANES, SUBLANES = 128, 8
_MOVES = {"get", "swap", "slice"}


def _vreg_elements(eqn: Any) -> int:
    """The elements of the vregs a vector operation works on: its result's (a reduction's
    operand's), each array's last two dimensions padded to whole (8, 128) tiles, since the VPU
    works on whole vregs (a (rows, 1) column costs as much as (rows, 128))."""
    if eqn.primitive.name in AXIS_REDUCTIONS:
        return _padded(eqn.invars[0].aval)
    return sum(_padded(v.aval) for v in eqn.outvars)


def _operations_per_element(eqn: Any) -> int:
    """VPU operations per element: one, but x**n is multiplies by squaring (x**3: two) and a
    negative n a division more."""
    if eqn.primitive.name != "integer_pow":
        return 1
    power = abs(int(eqn.params["y"]))
    multiplies = max(power.bit_length() - 1 + bin(power).count("1") - 1, 1)
    return multiplies + int(eqn.params["y"] < 0)


def _padded(aval: Any) -> int:
    shape = tuple(int(d) for d in getattr(aval, "shape", ()))
    if not shape:  # a scalar: the scalar core's work, not the VPU's
        return 0
    rows, lanes = (1, *shape)[-2:]
    tiles = -(-rows // SUBLANES) * SUBLANES * (-(-lanes // LANES) * LANES)
    return math.prod(shape[:-2]) * tiles


def _shifted_elements(eqn: Any) -> int:
    """The padded elements a read (`get`), write (`swap`) or `slice` moves across vregs: all of
    the value where its window starts off the (8, 128) tiling at a static offset, else none
    (a dynamic offset is taken as aligned)."""
    name = eqn.primitive.name
    if name == "slice":
        starts = list(eqn.params["start_indices"])
        value = eqn.outvars[0].aval
    else:
        value = (eqn.outvars[0] if name == "get" else eqn.invars[1]).aval
        leaves = eqn.invars[1:] if name == "get" else eqn.invars[2:]
        try:
            transforms = tree_util.tree_unflatten(eqn.params["tree"], leaves)
        except (TypeError, ValueError):
            return 0
        # the last indexer places the window in the value's vregs (`ref.at[slot][:, ds]`)
        if not transforms or not hasattr(transforms[-1], "indices"):
            return 0
        starts = [getattr(index, "start", 0) for index in transforms[-1].indices]
    lane, sublane = (0, 0, *starts)[-1], (0, 0, *starts)[-2]
    static = isinstance(lane, int) and isinstance(sublane, int)
    if not static or (lane % LANES == 0 and sublane % SUBLANES == 0):
        return 0
    return _padded(value)


@dataclass
class _BodyWork:
    """What one grid step of a kernel body computes."""

    mxu: float = 0.0
    mxu_f32: float = 0.0
    mxu_highest: float = 0.0
    vector: float = 0.0
    transcendental: float = 0.0
    dims: list[list[int]] = field(default_factory=list)
    dma_starts: float = 0.0


def analyze(
    closed_jaxpr: Any, scalars: Sequence[ScalarOperands] | None = None
) -> list[KernelAnalysis]:
    """Every pallas_call in the program, in order. Target-independent: the model and its
    warnings (perf/model.py) bring the TPU generation. `scalars`: each call's dynamic grid
    bounds and scalar-prefetch operands at the inputs estimated for (flat_program.py), which
    make its grid and block fetches exact; without them a data-dependent grid or index map is
    taken at its upper bound."""
    sites = pallas_calls(closed_jaxpr.jaxpr)
    if scalars is None or len(scalars) != len(sites):
        return [_analyze_call(site.eqn) for site in sites]
    return [_analyze_call(site.eqn, known) for site, known in zip(sites, scalars, strict=True)]


def transcendental_elements(closed_jaxpr: Any) -> float:
    """Elements of exp, log, tanh, ... a program computes outside its Pallas kernels (XLA's
    cost analysis on a TPU does not count them; perf/xla_model.py needs them)."""
    return float(
        sum(
            site.times * sum(math.prod(getattr(v.aval, "shape", ())) for v in site.eqn.outvars)
            for site in walk(closed_jaxpr.jaxpr)
            if site.name in _TRANSCENDENTAL
        )
    )


# Operations that only re-lay an array out: XLA fuses them into their consumer, which reads the
# source.
_LAYOUT = {"broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims"}


def matmul_traffic(closed_jaxpr: Any) -> list[list[float]]:
    """Each matmul and convolution of a program outside Pallas kernels (XLA's side), once per
    run: [flops, bytes it streams, bytes XLA's cost analysis counts for it, the share of the
    MXU's peak XLA reaches on it]. It streams its operands at their own size and writes its
    result; where a matmul's operand is a broadcast of a smaller array (`jnp.repeat` of key heads
    for grouped attention) XLA fuses the broadcast into the dot, so the cost analysis counts the
    source once while the dot streams it once per batch element it is broadcast to. Measured on
    a v5e: JAXBench's paged attention baseline (key heads repeated 8x) took 3.57 ms, its cost
    analysis's bytes 1.1 ms, these streams 3.65 ms (benchmarks/model_vs_jaxbench.py)."""
    producers: dict[Any, Any] = {
        out: site.eqn for site in walk(closed_jaxpr.jaxpr) for out in site.eqn.outvars
    }
    found = []
    for site in walk(closed_jaxpr.jaxpr):
        if site.name == "conv_general_dilated":
            flops, streamed, counted, share = _convolution(site.eqn)
        elif site.name == "dot_general":
            flops, streamed, counted, share = _matmul(site.eqn, producers)
        else:
            continue
        found.append([site.times * flops, site.times * streamed, site.times * counted, share])
    return found


# The share of the MXU's peak XLA's 2-D convolutions reach, against its matmuls' (XLA_EFFICIENCY
# covers both): the time two more bf16 passes add to 22k's and 34k's references on a v5e (3.73
# and 1.80 ms measured, benchmarks/results/measured_v5e.md) over what they add at the peak.
CONVOLUTION_MXU_SHARE = 0.87


def _matmul(eqn: Any, producers: dict[Any, Any]) -> tuple[float, float, float, float]:
    """(flops, bytes streamed, bytes the cost analysis counts, MXU share) of a dot_general."""
    (contracting, _), _ = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars[:2]
    depth = math.prod(lhs.aval.shape[d] for d in contracting)
    (out,) = eqn.outvars
    streamed = counted = _bytes(out, _elements(out))
    for operand in (lhs, rhs):
        source = operand
        while not hasattr(source, "val") and source in producers:  # a Var, not a literal
            layout = producers[source]
            if layout.primitive.name not in _LAYOUT:
                break
            source = layout.invars[0]
        streamed += _bytes(operand, _elements(operand))
        counted += _bytes(operand, min(_elements(source), _elements(operand)))
    return 2.0 * _elements(out) * depth, streamed, counted, 1.0


def _convolution(eqn: Any) -> tuple[float, float, float, float]:
    """(flops, bytes streamed, bytes the cost analysis counts, MXU share) of a
    conv_general_dilated: each output element sums its kernel's taps over the input channels of
    its group, so its depth is the kernel's size per output channel."""
    image, kernel = eqn.invars[:2]
    (out,) = eqn.outvars
    out_channels = kernel.aval.shape[eqn.params["dimension_numbers"].rhs_spec[0]]
    depth = _elements(kernel) // out_channels
    moved = sum(_bytes(v, _elements(v)) for v in (image, kernel, out))
    return 2.0 * _elements(out) * depth, moved, moved, CONVOLUTION_MXU_SHARE


def _elements(var: Any) -> int:
    return math.prod(getattr(var.aval, "shape", ()))


def _bytes(var: Any, elements: int) -> float:
    return float(elements * np.dtype(var.aval.dtype).itemsize)


def _analyze_call(eqn: Any, scalars: ScalarOperands | None = None) -> KernelAnalysis:
    grid_mapping = eqn.params["grid_mapping"]
    grid = _grid_extents(eqn, grid_mapping, scalars)
    steps = math.prod(grid) if grid else 1
    block_indices, exact = _block_indices_per_step(grid_mapping, grid, steps, scalars)
    blocks = _pipelined_blocks(grid_mapping, block_indices, steps) + _scratch(grid_mapping)
    shares = _branch_shares(eqn.params["jaxpr"], grid, steps, scalars.index if scalars else [])
    body = _body_work(eqn.params["jaxpr"], shares)
    params = _compiler_params(eqn.params.get("compiler_params"))
    # An operand left in HBM that the body copies itself: read (at least) once in all.
    copied = sum(
        b.bytes
        for b in blocks
        if body.dma_starts and b.memory_space == MemorySpace.ANY and not b.is_output
    )
    return KernelAnalysis(
        name=_kernel_name(eqn),
        grid=grid,
        dimension_semantics=[
            str(s).lower().split(".")[-1]
            for s in getattr(params, "dimension_semantics", None) or []
        ],
        blocks=blocks,
        scalar_prefetch=int(grid_mapping.num_index_operands),
        # pipelined blocks are double-buffered, scratch is not
        vmem_bytes=sum(
            b.bytes * (1 if b.is_scratch else 2)
            for b in blocks
            if b.memory_space == MemorySpace.VMEM
        ),
        vmem_limit_bytes=getattr(params, "vmem_limit_bytes", None),
        hbm_bytes=sum(b.bytes * b.fetches for b in blocks) + copied,
        steps=steps,
        mxu_flops_per_step=body.mxu,
        mxu_f32_flops_per_step=body.mxu_f32,
        vector_ops_per_step=body.vector,
        transcendentals_per_step=body.transcendental,
        matmul_dims=body.dims,
        index_maps_exact=exact,
        mxu_highest_flops_per_step=body.mxu_highest,
        dma_starts_per_step=body.dma_starts,
    )


def _pipelined_blocks(
    grid_mapping: Any, block_indices: list[np.ndarray | None], steps: int
) -> list[Block]:
    """The inputs and outputs, with how often the pipeline moves each."""
    blocks = []
    for position, mapping in enumerate(grid_mapping.block_mappings):
        role = (
            f"input {position}"
            if position < grid_mapping.num_inputs
            else f"output {position - grid_mapping.num_inputs}"
        )
        shape = [int(d) for d in mapping.transformed_block_aval.shape]
        dtype = mapping.transformed_block_aval.dtype
        space = _memory_space(mapping.block_aval)
        size = math.prod(shape) * _itemsize(dtype)
        fetches = _fetch_count(block_indices[position], steps) if space == MemorySpace.VMEM else 0
        array_shape = [int(d) for d in mapping.array_aval.shape]
        blocks.append(Block(role, shape, array_shape, str(dtype), space, size, fetches))
    return blocks


def _scratch(grid_mapping: Any) -> list[Block]:
    blocks = []
    for position, aval in enumerate(grid_mapping.scratch_avals):
        inner = getattr(aval, "inner_aval", aval)
        shape = [int(d) for d in getattr(inner, "shape", ())]
        dtype = getattr(inner, "dtype", None)
        size = math.prod(shape) * _itemsize(dtype)
        blocks.append(
            Block(f"scratch {position}", shape, shape, str(dtype), _memory_space(aval), size, 0)
        )
    return blocks


def _itemsize(dtype: Any) -> int:
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:  # semaphores and other TPU-only types: one 32-bit word each
        return 4


def _memory_space(aval: Any) -> MemorySpace:
    space = str(getattr(aval, "memory_space", "") or "").lower()
    if "smem" in space:
        return MemorySpace.SMEM
    if "semaphore" in space:
        return MemorySpace.SEMAPHORE
    if "any" in space or "hbm" in space:
        return MemorySpace.ANY
    return MemorySpace.VMEM  # default blocks are pipelined through VMEM


def _compiler_params(value: Any) -> Any:
    if isinstance(value, dict):  # older jax: {"mosaic_tpu": CompilerParams}
        return value.get("mosaic_tpu") or value.get("mosaic") or next(iter(value.values()), None)
    return value


def _grid_extents(eqn: Any, grid_mapping: Any, scalars: ScalarOperands | None) -> list[int]:
    """The grid's extents. One known only at run time (megablox's count of active group tiles)
    is its value at the estimated inputs where `scalars` are known, else taken at its upper
    bound, the length of the longest scalar-prefetched index array (the items the grid may
    visit): an estimate of the worst case, said so by the caller."""
    if scalars is not None:
        known = iter(scalars.grid_bounds)
        return [int(g) if isinstance(g, int) else next(known) for g in grid_mapping.grid]
    dynamic = int(grid_mapping.num_dynamic_grid_bounds)
    prefetched = eqn.invars[dynamic : dynamic + int(grid_mapping.num_index_operands)]
    bound = max((_elements(v) for v in prefetched), default=1)
    return [int(g) if isinstance(g, int) else bound for g in grid_mapping.grid]


def _kernel_name(eqn: Any) -> str:
    debug = getattr(eqn.params.get("jaxpr"), "debug_info", None)
    name = getattr(debug, "func_name", None) or eqn.params.get("name") or "kernel"
    return str(name).split(" ")[0]


def _block_indices_per_step(
    grid_mapping: Any, grid: list[int], steps: int, scalars: ScalarOperands | None
) -> tuple[list[np.ndarray | None], bool]:
    """Block indices of every block at every grid step (row-major, last axis fastest), or None
    where they cannot be known (scalar-prefetch index maps without their operands, huge
    grids), with whether they are known."""
    mappings = grid_mapping.block_mappings
    prefetched = int(grid_mapping.num_index_operands)
    operands = scalars.index if scalars is not None else []
    unknown = prefetched and len(operands) != prefetched
    if unknown or steps > MAX_ENUMERATED_STEPS or not grid:
        return [None] * len(mappings), not unknown and steps <= MAX_ENUMERATED_STEPS
    points = _grid_points(grid, steps)
    indices: list[np.ndarray | None] = [
        block_indices(mapping.index_map_jaxpr, points, operands) for mapping in mappings
    ]
    return indices, True


def _grid_points(grid: list[int], steps: int) -> np.ndarray:
    """Every grid step's indices, row-major (last axis fastest), one row per step."""
    return np.stack(np.unravel_index(np.arange(steps), grid), axis=-1).astype(np.int32)


def _branch_shares(
    body: Any, grid: list[int], steps: int, index_operands: Sequence[np.ndarray]
) -> dict[int, np.ndarray]:
    """The share of steps taking each branch of the body's top-level conds that depend on the
    grid indices and the known scalar-prefetch values alone (index_maps.branch_shares); none
    for huge grids."""
    if not grid or steps > MAX_ENUMERATED_STEPS:
        return {}
    return branch_shares(body, _grid_points(grid, steps), grid, index_operands)


def _fetch_count(indices: np.ndarray | None, steps: int) -> int:
    if indices is None:
        return steps
    if indices.shape[1] == 0:
        return 1
    changed = np.any(indices[1:] != indices[:-1], axis=1)
    return 1 + int(changed.sum())


def _body_work(body: Any, shares: dict[int, np.ndarray]) -> _BodyWork:
    """Work per grid step, on average over the grid. A branch under a cond whose choice depends
    on the grid indices alone (`pl.when` of a causal mask's block test) counts by the share of
    steps that take it; under any other cond it counts fully (an upper bound). A loop's body
    counts as often as its scan runs (pl.loop over static bounds), a while loop's once."""
    totals = _BodyWork()
    share_of = {
        site.number: shares[id(site.eqn)]
        for site in walk(body)
        if site.name == "cond" and id(site.eqn) in shares
    }
    # DMA starts per branch of each outermost cond whose share is unknown: a step takes one
    branch_dmas: dict[tuple[int, int], float] = {}
    for site in walk(body):
        weight, known = 1.0, True
        for cond, index in site.branches:
            if cond in share_of:
                weight *= float(share_of[cond][index])
            else:
                known = False
        eqn: Any = site.eqn  # its avals' shapes and dtypes are read untyped
        name = site.name
        if name == "dma_start":
            if known:
                totals.dma_starts += weight * site.times
            else:
                key = next(b for b in site.branches if b[0] not in share_of)
                branch_dmas[key] = branch_dmas.get(key, 0.0) + weight * site.times
        one_run = sum(math.prod(getattr(v.aval, "shape", ())) for v in eqn.outvars)
        out_elements = weight * site.times * one_run
        runs = weight * site.times
        if name == "dot_general":
            (lhs_contract, rhs_contract), (_, rhs_batch) = eqn.params["dimension_numbers"]
            lhs, rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
            k = math.prod(lhs[d] for d in lhs_contract)
            n = math.prod(
                size for d, size in enumerate(rhs) if d not in (*rhs_contract, *rhs_batch)
            )
            totals.mxu += 2.0 * out_elements * k
            if eqn.invars[0].aval.dtype == np.float32:
                totals.mxu_f32 += 2.0 * out_elements * k
                if "HIGHEST" in str(eqn.params.get("precision")):
                    totals.mxu_highest += 2.0 * out_elements * k
            totals.dims.append([int(one_run // max(n, 1)), int(k), int(n)])
        elif name in _TRANSCENDENTAL:
            totals.transcendental += runs * _vreg_elements(eqn)
        elif name in _VECTOR:
            totals.vector += runs * _vreg_elements(eqn) * _operations_per_element(eqn)
        elif name in _MOVES:
            totals.vector += runs * LANE_SHIFT_OPS * _shifted_elements(eqn)
    busiest: dict[int, float] = {}
    for (cond, _), count in branch_dmas.items():
        busiest[cond] = max(busiest.get(cond, 0.0), count)
    totals.dma_starts += sum(busiest.values())
    return totals
