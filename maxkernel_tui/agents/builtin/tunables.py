"""The knobs of a generated kernel: preferred block sizes, declared at the top of the file."""

from __future__ import annotations

from dataclasses import dataclass

# What the autotuner tries for each knob, one knob at a time.
CHOICES = {
    "block_rows": (128, 256, 512, 1024),
    "block_cols": (256, 512, 1024, 2048),
    "block_depth": (256, 512, 1024, 2048),
}


@dataclass(frozen=True)
class Tunables:
    """Preferred block sizes; the file shrinks each to a legal divisor of the actual size."""

    block_rows: int = 512
    block_cols: int = 512
    block_depth: int = 512


def default_tunables(narrow_dtype: bool) -> Tunables:
    """Starting point: bf16 operands halve the bytes per block, so blocks can be twice as large."""
    return Tunables(1024, 1024, 512) if narrow_dtype else Tunables(512, 512, 512)
