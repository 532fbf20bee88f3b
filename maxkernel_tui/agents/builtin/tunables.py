"""The knobs of a generated kernel: preferred block sizes, declared at the top of the file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

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
    # A matmul's row-wise epilogue in the matmul's kernel (running statistics across column
    # blocks, or whole rows); off: the matmul writes its result and a second kernel reads it.
    fuse_epilogue: bool = True

    def with_knob(self, knob: str, value: int) -> Tunables:
        """These tunables with one knob set (a flag from 0 or 1)."""
        return Tunables.from_setting({**self.setting(), knob: value})

    def setting(self) -> dict[str, int]:
        """Every knob by name, flags as 0 or 1 (as a timed setting is kept)."""
        return {f.name: int(getattr(self, f.name)) for f in fields(self)}

    @staticmethod
    def from_setting(setting: Mapping[str, int]) -> Tunables:
        """The tunables of a setting made by `setting` (flags back to booleans)."""
        default = Tunables()
        return Tunables(
            setting.get("block_rows", default.block_rows),
            setting.get("block_cols", default.block_cols),
            setting.get("block_depth", default.block_depth),
            bool(setting.get("fuse_epilogue", default.fuse_epilogue)),
        )


def default_tunables(narrow_dtype: bool) -> Tunables:
    """Starting point: bf16 operands halve the bytes per block, so blocks can be twice as large."""
    return Tunables(1024, 1024, 512) if narrow_dtype else Tunables(512, 512, 512)
