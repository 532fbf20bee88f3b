"""Whether a sampled production run (evaluation/tiles/sampled_run.py) fits in the memory of the
process that would run it. No jax.

TPU interpret mode copies every operand and output of a kernel into its own buffers (padded),
and copies the outputs back: measured with `python benchmarks/tiles_memory.py`, a sampled
GEMM's peak address space grows by 2.2x to 2.8x its operand and output bytes. A run that does
not fit does not fail cleanly: XLA's CPU threads die with SIGSEGV when an allocation fails
under the address-space limit, which would reject an honest kernel for our own want of memory.
So a program whose buffers do not fit is not sampled, and its verdict says so.

The sampled call is handed compact operands (compact.py: the sampled blocks only), so the
interpreter's copies follow the sample; a program whose outputs are its one kernel's reads them
from the compact run and never makes them whole; otherwise each kernel's outputs are placed back
at production shape and dropped after their last use, as every production value is; the
provenance pass keeps
only the sampled regions of each kernel's outputs (sampled_run.py). Before the run, the
production values alive at each kernel are known (`shortfall`); once a kernel's sample is drawn,
its compact buffers are (`compact_shortfall`).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from maxkernel_tui.kernels import memory
from maxkernel_tui.kernels.targets import GIB

# A kernel's peak growth over its operand and output bytes in TPU interpret mode (measured 2.2x
# from a few hundred MiB up, 2.8x at 40 MiB where fixed costs count), with a fixed margin.
INTERPRET_FACTOR = 2.5
MARGIN = GIB // 4


@dataclass(frozen=True)
class KernelBuffers:
    """One pallas_call of the program, in the order the program runs them."""

    name: str
    output_bytes: int  # at production shape
    live_bytes: int  # other production values alive while it runs (not the program's inputs)


def shortfall(kernels: list[KernelBuffers], final_bytes: int, room: float | None) -> str | None:
    """Why the sampled run would not fit in `room` bytes, or None when it fits (or the room is
    unknown), as far as is known before any sample is drawn. Each kernel's outputs at
    production shape are alive beside the production values the program holds at that point,
    in both passes; in the provenance pass, beside the program's outputs (`final_bytes`) of the
    first (13p's 4.2 GB of logits twice ran out of its 8 GiB). What the interpreter copies is
    checked per kernel on the compact buffers (`compact_shortfall`)."""
    if room is None:
        return None
    for kernel in kernels:
        need = final_bytes + kernel.live_bytes + kernel.output_bytes + MARGIN
        if need > room:
            return (
                f"{kernel.name}'s production outputs ({gib(kernel.output_bytes)}) need about "
                f"{gib(need)} with the values alive beside them and the program's outputs "
                f"kept for the provenance pass, more than the {gib(room)} this process has left"
            )
    return None


def compact_shortfall(
    name: str, interpreted_bytes: int, placed_bytes: int, room: float | None
) -> str | None:
    """Why one sampled kernel would not fit in `room` bytes (what the process has left now), or
    None: the interpreter's copies of what it is handed (`interpreted_bytes`: compact operands
    and outputs, and those left whole) and its outputs placed back at production shape."""
    if room is None:
        return None
    need = INTERPRET_FACTOR * interpreted_bytes + placed_bytes + MARGIN
    if need <= room:
        return None
    return (
        f"{name}'s sampled operands and outputs ({gib(interpreted_bytes)}) and its outputs at "
        f"production shape ({gib(placed_bytes)}) need about {gib(need)} in TPU interpret mode, "
        f"more than the {gib(room)} this process has left"
    )


def memory_room() -> int | None:
    """Bytes this process may still allocate: under its address-space limit (RLIMIT_AS, less
    what it has mapped) and within the machine's available memory; None when neither is known."""
    bounds: list[int] = []
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    mapped = memory.process_bytes("VmSize")
    if limit != resource.RLIM_INFINITY and mapped is not None:
        bounds.append(limit - mapped)
    available = memory.available_bytes()
    if available is not None:
        bounds.append(available)
    return min(bounds) if bounds else None


def gib(size: float) -> str:
    return f"{size / GIB:.1f} GiB"
