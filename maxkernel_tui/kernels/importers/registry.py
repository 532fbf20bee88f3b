"""The importers `tasks import` knows, one per source kind, and how the right one is found.
No jax.

Each importer's `detects` looks at the file statically; the first that recognises it translates
it. Another kind (the PyTorch module importer) joins with `register`, before the JAX function
importer, which accepts any file that imports jax.
"""

from __future__ import annotations

from pathlib import Path

from maxkernel_tui.kernels.importers import SourceImporter, TaskImportError
from maxkernel_tui.kernels.importers.jax_function import JaxFunctionImporter

_IMPORTERS: list[SourceImporter] = [JaxFunctionImporter()]


def register(importer: SourceImporter) -> None:
    """Add a source kind; it is asked before the ones already known (they are more general)."""
    if any(known.kind == importer.kind for known in _IMPORTERS):
        raise ValueError(f"an importer of kind {importer.kind!r} is already registered")
    _IMPORTERS.insert(0, importer)


def importers() -> tuple[SourceImporter, ...]:
    return tuple(_IMPORTERS)


def detect(path: Path, source: str) -> SourceImporter:
    """The importer that recognises this file; TaskImportError naming the kinds tried."""
    for importer in _IMPORTERS:
        if importer.detects(path, source):
            return importer
    kinds = ", ".join(importer.kind for importer in _IMPORTERS)
    raise TaskImportError(f"{path}: not a source kind tasks import knows (tried {kinds})")
