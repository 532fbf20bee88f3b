"""The importers `tasks import` knows, one per source kind, and how the right one is found.
No jax.

Each importer's `detects` looks at the file statically; the first that recognises it translates
it, so the more specific kinds come first. Importers that need an LLM (the porter, in agents/)
are put before these by the caller that has a client.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from maxkernel_tui.kernels.importers import SourceImporter, TaskImportError
from maxkernel_tui.kernels.importers.jax_function import JaxFunctionImporter
from maxkernel_tui.kernels.importers.torch_module import TorchModuleImporter


def offline_importers() -> tuple[SourceImporter, ...]:
    """What needs nothing but the file: a PyTorch module in KernelBench's format, then a JAX
    function (which accepts any file that imports jax)."""
    return (TorchModuleImporter(), JaxFunctionImporter())


def detect(path: Path, source: str, importers: Sequence[SourceImporter]) -> SourceImporter:
    """The importer that recognises this file; TaskImportError naming the kinds tried."""
    for importer in importers:
        if importer.detects(path, source):
            return importer
    kinds = ", ".join(importer.kind for importer in importers)
    raise TaskImportError(f"{path}: not a source kind tasks import knows (tried {kinds})")
