"""Ahead-of-time TPU compiles with libtpu, on a machine without a TPU. Imports jax.

`jax.experimental.topologies` describes a TPU slice; compiling against one of its devices
runs the real TPU compiler (XLA and Mosaic), so HBM and VMEM limits and Mosaic errors are the
ones a TPU would report. Run with JAX_PLATFORMS=cpu.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from maxkernel_tui.kernels.perf.hlo_relayouts import relayout_bytes
from maxkernel_tui.kernels.targets import TARGETS, TpuTarget, fallback_chain


class OutOfHbm(Exception):
    """The compiler says the program needs more HBM than the target has."""


@dataclass(frozen=True)
class CompileReport:
    target: str
    compile_seconds: float
    flops: float | None
    bytes_accessed: float | None
    optimal_seconds: float | None
    relayouts: tuple[int, int]  # bytes read and written by copies into another layout
    # Generations tried first that were too small, with the compiler's words.
    did_not_fit: list[tuple[str, str]] = field(default_factory=list)


def target_for(name: str) -> TpuTarget:
    """A known generation, or any other that libtpu can describe (e.g. "v5litepod")."""
    if name in TARGETS:
        return TARGETS[name]
    for topology in (f"{name}:2x2", f"{name}:2x2x1", name):
        try:
            topologies.get_topology_desc(topology, "tpu")  # libtpu knows it: we compile for it
        except Exception:
            continue
        return TpuTarget(name, topology, hbm_bytes=0, generation=0)
    raise KeyError(f"libtpu does not know TPU {name!r}; known here: {', '.join(TARGETS)}")


@functools.cache
def _single_device_sharding(topology: str) -> NamedSharding:
    return NamedSharding(Mesh([target_device(topology)], ("x",)), PartitionSpec())


@functools.cache
def target_device(topology: str) -> Any:
    """The first chip of a TPU topology, as a device description (nothing runs on it)."""
    return topologies.get_topology_desc(topology, "tpu").devices[0]


def on_target(target: TpuTarget) -> Any:
    """A context in which the target's chip is jax's default device: kernels that ask the
    default device for its TPU kind while lowering (jax's ragged paged attention, through
    `pltpu.get_tpu_info`) see the target's instead of the CPU's."""
    return jax.default_device(target_device(target.topology))


def compile_for_tpu(
    fn: Callable[..., Any], specs: Sequence[jax.ShapeDtypeStruct], target: TpuTarget
) -> Any:
    """`jax.jit(fn)` lowered and compiled for one chip of `target`; returns the Compiled."""
    sharding = _single_device_sharding(target.topology)
    args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in specs]
    try:
        # keep_unused: an argument the program ignores still pins it to the TPU device
        with on_target(target):
            return jax.jit(fn, keep_unused=True).lower(*args).compile()
    except Exception as error:
        text = str(error)
        if "RESOURCE_EXHAUSTED" in text and "HBM" in text:
            raise OutOfHbm(text.strip().splitlines()[0]) from None
        raise


def compile_with_fallback(
    fn: Callable[..., Any], specs: Sequence[jax.ShapeDtypeStruct], first: str
) -> CompileReport:
    """Compile for `first`; when it runs out of HBM, for the next larger generation."""
    did_not_fit: list[tuple[str, str]] = []
    for target in fallback_chain(first):
        start = time.perf_counter()
        try:
            compiled = compile_for_tpu(fn, specs, target)
        except OutOfHbm as error:
            did_not_fit.append((target.name, str(error)))
            continue
        cost = cost_of(compiled)
        return CompileReport(
            target=target.name,
            compile_seconds=time.perf_counter() - start,
            flops=cost.get("flops"),
            bytes_accessed=cost.get("bytes accessed"),
            optimal_seconds=cost.get("optimal_seconds"),
            relayouts=relayouts_of(compiled),
            did_not_fit=did_not_fit,
        )
    raise OutOfHbm(
        "does not fit any known TPU generation: " + "; ".join(f"{n}: {m}" for n, m in did_not_fit)
    )


def cost_of(compiled: Any) -> dict[str, float]:
    """XLA's cost analysis of a compiled program as one dict (flops, bytes accessed, ...)."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older jax returned one dict per program
        analysis = analysis[0] if analysis else {}
    return dict(analysis or {})


def relayouts_of(compiled: Any) -> tuple[int, int]:
    """(bytes read, bytes written) by a compiled program's copies into another layout, which
    its cost analysis counts as any other bytes (perf/hlo_relayouts.py)."""
    return relayout_bytes(compiled.as_text() or "")
