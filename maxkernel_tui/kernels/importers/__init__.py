"""Turning code from elsewhere into a task folder: the contract every importer follows. No jax.

`maxkernel-tui tasks import FILE` asks each importer whether it recognises the file (a JAX
function, a PyTorch module in KernelBench's format, ...). The one that does translates the source
into a `PlainTaskSource`: a reference in the plain adapted format (production sizes as integer
constants, `get_inputs(dtype=...)` returning `[dynamic], [static]`, `computation(...)`). The
shared writer then derives `check` and `heldout` from those sizes, validates the reference in a
worker and writes a folder in our format, so every importer gets the same guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


class ImporterKind(StrEnum):
    """The kinds of source an importer reads; shown to the user ("from a jax-function") and
    written into the task's `operation`."""

    JAX_FUNCTION = "jax-function"
    PYTORCH_MODULE = "pytorch-module"
    PORTER = "porter"  # the porter agent's (agents/porting.py): Triton, CUDA, PyTorch by an LLM


@dataclass(frozen=True)
class ImportOptions:
    """What the user said on the command line (or in the picker's import form)."""

    function: str | None = None  # the entry point, for sources that hold several
    args: str | None = None  # e.g. "bf16[8,4096,8192] f32[8192]": dynamic inputs by shape
    static: tuple[str, ...] = ()  # static arguments as Python literals, e.g. ("1e-5",)
    tolerance: tuple[float, float] | None = None  # (atol, rtol); None: default by dtype


@dataclass(frozen=True)
class PlainTaskSource:
    """A task in the plain adapted format, before `check`/`heldout` are derived."""

    task_id: str
    description: str
    reference_py: str  # the full text of reference.py
    atol: float
    rtol: float
    # Human-readable facts the writer puts in the listing and every report ("parameters
    # initialised as PyTorch does", "not compared with PyTorch", ...).
    notes: tuple[str, ...] = ()
    # Extra files to copy beside reference.py (name -> text), e.g. the original source.
    extra_files: dict[str, str] = field(default_factory=dict)
    # How atol and rtol were chosen, in words (shown after `notes`).
    tolerance_note: str = ""
    # atol and rtol are the 16-bit default, not the user's: the writer raises them where the
    # reference's own rounding needs more (importers/calibration.py).
    calibrate_tolerance: bool = False

    @property
    def all_notes(self) -> tuple[str, ...]:
        return self.notes + ((self.tolerance_note,) if self.tolerance_note else ())


class SourceImporter(Protocol):
    """One kind of source (JAX function, PyTorch module, ...)."""

    kind: ImporterKind

    def detects(self, path: Path, source: str) -> bool:
        """Whether this importer recognises the file (static: the source is not run)."""
        ...

    def translate(self, path: Path, source: str, options: ImportOptions) -> PlainTaskSource:
        """The task this source defines; raises TaskImportError with a clear message."""
        ...
