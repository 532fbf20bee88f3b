"""TPU generations we compile for ahead of time. Data only; no jax here.

HBM sizes are the per-chip capacities; the compiler reports slightly less as usable
(v5e: 15.75 GiB of 16). The performance model extends this table with peak flop/s,
bandwidth and VMEM.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class TpuTarget:
    name: str  # short name used on the command line and in listings
    topology: str  # argument of jax.experimental.topologies.get_topology_desc
    device_kind: str  # what jax reports for a device of this generation
    hbm_bytes: int
    generation: int  # newer generations are preferred among equal HBM sizes


TARGETS: dict[str, TpuTarget] = {
    t.name: t
    for t in (
        TpuTarget("v5e", "v5e:2x2", "TPU v5 lite", 16 * GIB, 5),
        TpuTarget("v6e", "v6e:2x2", "TPU v6 lite", 32 * GIB, 6),
        TpuTarget("v4", "v4:2x2x1", "TPU v4", 32 * GIB, 4),
        TpuTarget("v5p", "v5p:2x2x1", "TPU v5", 95 * GIB, 5),
    )
}

DEFAULT_TARGET = "v5e"


def fallback_chain(first: str = DEFAULT_TARGET) -> list[TpuTarget]:
    """`first`, then every generation with more HBM, smallest first (newest first among
    equals): where a reference does not fit, the listing says which generation holds it."""
    if first not in TARGETS:
        raise KeyError(f"unknown TPU target {first!r}; known: {', '.join(TARGETS)}")
    start = TARGETS[first]
    larger = sorted((t for t in TARGETS.values() if t.hbm_bytes > start.hbm_bytes),
                    key=lambda t: (t.hbm_bytes, -t.generation))
    return [start, *larger]
