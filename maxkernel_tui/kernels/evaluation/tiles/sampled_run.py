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

The sample holds a block of every class of the kernel's scalar control (classes.py), the first
and last block of each output axis and a draw from a seed that is a digest of the kernel, the
task and the configuration (plan.py), so the same kernel gets the same sample; the blocks a
later kernel's sample reads are pulled back to earlier kernels (pullback.py). What each output
element of the whole program depends on is followed by running the XLA around the kernels a
second time with the sampled blocks finite and everything else NaN: the elements that come out
finite are those the sample decides (`SampledOutputs.decided`). A program whose outputs are its
one kernel's needs no second pass: the decided values are read from the compact run, and no
output is made at production shape. The comparison with the reference happens elsewhere (the
harness), never in the process that runs the candidate.
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
from jax.experimental.pallas import tpu as pltpu
from jax.extend import core
from jax.extend.core import Var

from maxkernel_tui.kernels.evaluation.tiles import memory as tiles_memory
from maxkernel_tui.kernels.evaluation.tiles import poison, pullback
from maxkernel_tui.kernels.evaluation.tiles.blocks import Region
from maxkernel_tui.kernels.evaluation.tiles.faults import KernelFault, NotSampleable
from maxkernel_tui.kernels.evaluation.tiles.kernel_run import KernelSample, kernel_name, run_kernel
from maxkernel_tui.kernels.evaluation.work.jaxpr_work import value_bytes
from maxkernel_tui.kernels.perf.flat_program import KERNEL_CALLS, holds_kernel

__all__ = ["KernelFault", "NotSampleable", "SampledOutputs", "run_sampled"]


@dataclass(frozen=True)
class Decided:
    """The elements of one program output the sample decides: their flat row-major indices
    (sorted) and their values, in the output's type."""

    shape: tuple[int, ...]
    indices: np.ndarray  # int64
    values: np.ndarray

    def mask(self) -> np.ndarray:
        """The decided elements as a boolean array of the output's shape."""
        mask = np.zeros(math.prod(self.shape), np.bool_)
        mask[self.indices] = True
        return mask.reshape(self.shape)


@dataclass(frozen=True)
class SampledOutputs:
    """What the sample decides of each program output, and the kernels' sampled runs."""

    decided: list[Decided]
    kernels: list[KernelSample]

    @property
    def decided_elements(self) -> int:
        return sum(int(d.indices.size) for d in self.decided)


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
    buffers = _kernel_buffers(closed_jaxpr)
    direct = _direct_outputs(closed_jaxpr.jaxpr) if len(buffers) == 1 else None
    final = value_bytes(closed_jaxpr.jaxpr.outvars)
    if direct is not None:  # its outputs are read from the compact run, never made whole
        buffers, final = [dataclasses.replace(b, output_bytes=0) for b in buffers], 0
    problem = tiles_memory.shortfall(buffers, final, tiles_memory.memory_room())
    if problem is not None:
        raise NotSampleable(problem)
    plans = pullback.plan(closed_jaxpr, inputs, rng, random_blocks)
    if not plans:
        raise NotSampleable("the program has no pallas_call outside control flow")
    recorded: list[tuple[list[_Kept], list[list[Region]]]] = []
    kernels: list[KernelSample] = []
    # the one kernel's run, its decided regions and output shapes, when direct
    straight: list[tuple[poison.Ran, list[list[Region]], list[tuple[int, ...]]]] = []

    def sampled(eqn: Any, args: list[Any]) -> list[Any]:
        # the planned sample exactly: it holds what the usual sampling would add
        required = plans[len(kernels)].sample
        ran, regions, sample = run_kernel(
            eqn, args, rng, 0, params, required=required, placed_back=direct is None
        )
        kernels.append(sample)
        if direct is not None:  # its operands are what a provenance run would give it
            decided = pullback.decided_regions(eqn, args, _as_run(plans[0], sample), regions)
            straight.append((ran, decided, [tuple(var.aval.shape) for var in eqn.outvars]))
            # the outputs are read from the compact run: nothing after the kernel is needed
            return [_Unneeded(var.aval) for var in eqn.outvars]
        outputs = ran.expand()
        # only the sampled regions are kept for the provenance pass, not the production outputs
        kept = [_keep(o, tuple(r)) for o, r in zip(outputs, regions, strict=True)]
        recorded.append((kept, regions))
        return outputs

    outputs = _evaluate(closed_jaxpr.jaxpr, closed_jaxpr.consts, list(inputs), sampled)
    for output in outputs:
        _require_float(output, "a program output")
    if direct is not None:
        ((ran, regions, shapes),) = straight
        return SampledOutputs(
            [
                _picked(ran, number, regions[number], shapes[number], out.aval)
                for number, out in zip(direct, closed_jaxpr.jaxpr.outvars, strict=True)
            ],
            kernels,
        )
    replay = iter(zip(recorded, map(_as_run, plans, kernels), strict=True))

    def provenance(eqn: Any, args: list[Any]) -> list[Any]:
        (outputs, regions), planned = next(replay)
        # a sampled block reading an undecided element (another kernel's unsampled blocks)
        # leaves what it writes undecided: conservative, never a wrong element decided
        decided = pullback.decided_regions(eqn, args, planned, regions)
        return [out.followed(tuple(r)) for out, r in zip(outputs, decided, strict=True)]

    followed = _evaluate(closed_jaxpr.jaxpr, closed_jaxpr.consts, list(inputs), provenance)
    found = []
    for output, mask in zip(outputs, followed, strict=True):
        indices = np.flatnonzero(np.asarray(_decided(mask)))
        values = np.asarray(output).reshape(-1)[indices]
        found.append(Decided(tuple(output.shape), indices, values))
    return SampledOutputs(found, kernels)


def _as_run(planned: pullback.KernelPlan, ran: KernelSample) -> pullback.KernelPlan:
    """The plan with the blocks the kernel did run: a sample grown to the prefixes of an
    `arbitrary` axis holds blocks the plan has not, and those read what the plan's do not."""
    return dataclasses.replace(planned, sample=ran.ran, chains=ran.chains)


def _picked(
    ran: poison.Ran, number: int, regions: list[Region], kernel_shape: tuple[int, ...], aval: Any
) -> Decided:
    """A program output (`aval`) that is kernel output `number` of `kernel_shape`, reshaped or
    converted between float types (each element keeps its flat position): the values of its
    decided `regions`, read from the compact run, in row-major order."""
    ordered = sorted(regions)
    indices = [_flat(region, kernel_shape) for region in ordered] if ordered else []
    values = [ran.pick(number, region).reshape(-1) for region in ordered]
    flat = np.concatenate(indices) if indices else np.zeros(0, np.int64)
    picked = np.concatenate(values) if values else np.zeros(0, aval.dtype)
    # each region is in row-major order; regions that interleave (side by side along a row)
    # are sorted together
    if any(a.size and b.size and a[-1] >= b[0] for a, b in itertools.pairwise(indices)):
        order = np.argsort(flat, kind="stable")
        flat, picked = flat[order], picked[order]
    return Decided(tuple(aval.shape), flat, picked.astype(aval.dtype))


def _flat(region: Region, shape: tuple[int, ...]) -> np.ndarray:
    """The flat row-major indices of a region of an array of `shape`, in row-major order."""
    strides = [math.prod(shape[axis + 1 :]) for axis in range(len(shape))]
    flat = np.zeros((), np.int64)
    for (start, size), stride in zip(region, strides, strict=True):
        along = (start + np.arange(size, dtype=np.int64)) * stride
        flat = np.add.outer(flat, along)
    return flat.reshape(-1)


def _direct_outputs(jaxpr: Any) -> list[int] | None:
    """For a program whose every output is a pallas_call's output, at most reshaped or converted
    between float types (both keep each element's flat position and its NaN-ness), the number of
    that kernel output for each; else None. Those outputs' decided elements are the regions the
    kernel's decided blocks write: the provenance pass at production shape (seconds) is not
    needed for them."""
    producers = {var: eqn for eqn in jaxpr.eqns for var in eqn.outvars}
    numbers = []
    for var in jaxpr.outvars:
        while isinstance(var, Var) and var in producers:
            eqn = producers[var]
            if eqn.primitive.name == "pallas_call":
                numbers.append(list(eqn.outvars).index(var))
                break
            keeps = eqn.primitive.name == "convert_element_type" or (
                eqn.primitive.name == "reshape" and eqn.params.get("dimensions") is None
            )
            source = eqn.invars[0]
            if not keeps or len(eqn.invars) != 1 or not _floating(source) or not _floating(var):
                return None
            var = source
        else:
            return None
    return numbers


def _floating(var: Any) -> bool:
    return bool(jnp.issubdtype(var.aval.dtype, jnp.floating))


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
        if any(isinstance(value, _Unneeded) for value in invals):
            outvals = [_Unneeded(var.aval) for var in eqn.outvars]
        elif name == "pallas_call":
            outvals = on_kernel(eqn, invals)
        elif name in KERNEL_CALLS and holds_kernel(eqn):
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            inner_consts = getattr(inner, "consts", ())
            outvals = _evaluate(getattr(inner, "jaxpr", inner), inner_consts, invals, on_kernel)
        elif holds_kernel(eqn):
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


def _kernel_buffers(closed_jaxpr: Any) -> list[tiles_memory.KernelBuffers]:
    """Each pallas_call `_evaluate` would run (calls entered), with its output bytes at
    production shapes and the bytes of the values alive beside it, in order."""
    return [
        tiles_memory.KernelBuffers(kernel_name(eqn), value_bytes(eqn.outvars), live)
        for eqn, live in pullback.kernels_alive(closed_jaxpr)
    ]


@dataclass(frozen=True)
class _Unneeded:
    """A value the sampled run does not compute: a direct program's kernel outputs are read from
    the compact run, so what follows the kernel is not evaluated."""

    aval: Any

    @property
    def dtype(self) -> Any:
        return self.aval.dtype


@jax.jit
def _decided(value: jax.Array) -> jax.Array:
    return ~jnp.isnan(value)


def _require_float(value: Any, what: str) -> None:
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise NotSampleable(f"{what} of type {value.dtype} (undecided elements need NaN)")


@dataclass(frozen=True)
class _Kept:
    """A kernel output's sampled regions (`regions`, `blocks`), without the production array."""

    shape: tuple[int, ...]
    dtype: Any
    regions: tuple[Region, ...]
    blocks: tuple[jax.Array, ...]

    def followed(self, decided: tuple[Region, ...]) -> jax.Array:
        """The decided regions finite (their own value, NaN read as 0), the rest NaN; in the
        output's own type, so the XLA after the kernel runs as it did. Each decided region lies
        in a sampled one (pullback.decided_regions keeps sampled blocks only)."""
        blocks = []
        for region in decided:
            held = next(i for i, r in enumerate(self.regions) if _inside(region, r))
            blocks.append(
                self.blocks[held][
                    tuple(
                        slice(a - start, a - start + size)
                        for (a, size), (start, _) in zip(region, self.regions[held], strict=True)
                    )
                ]
            )
        starts = tuple(tuple(a for a, _ in region) for region in decided)
        filled: jax.Array = _place(tuple(blocks), starts, self.shape, self.dtype)  # untyped jit
        return filled


def _keep(output: jax.Array, regions: tuple[Region, ...]) -> _Kept:
    _require_float(output, "a kernel output")
    blocks = _crop(output, regions)
    return _Kept(tuple(output.shape), output.dtype, regions, blocks)


def _inside(region: Region, holder: Region) -> bool:
    return all(
        start <= a and a + size <= start + length
        for (a, size), (start, length) in zip(region, holder, strict=True)
    )


@functools.partial(jax.jit, static_argnums=1)
def _crop(output: jax.Array, regions: tuple[Region, ...]) -> tuple[jax.Array, ...]:
    return tuple(
        jax.lax.dynamic_slice(output, [a for a, _ in r], [size for _, size in r]) for r in regions
    )


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _place(
    blocks: tuple[jax.Array, ...], starts: tuple[tuple[int, ...], ...], shape: Any, dtype: Any
) -> jax.Array:
    result = jnp.full(shape, jnp.nan, dtype)
    for block, start in zip(blocks, starts, strict=True):
        block = jnp.nan_to_num(block, nan=0.0, posinf=0.0, neginf=0.0)
        result = jax.lax.dynamic_update_slice(result, block, list(start))
    return result
