"""The importers `tasks import` knows, one per source kind, and how the right one is found.
No jax.

Each importer's `detects` looks at the file statically; those that recognise it are tried in
order until one translates it (the offline translator before the porter agent, which costs a
model call). Importers that need an LLM (the porter, in agents/) are added by the caller that has
a client.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from maxkernel_tui.kernels.importers import ImportOptions, PlainTaskSource, SourceImporter
from maxkernel_tui.kernels.importers.jax_function import JaxFunctionImporter
from maxkernel_tui.kernels.importers.torch_module import TorchModuleImporter
from maxkernel_tui.kernels.task import TaskImportError


def offline_importers() -> tuple[SourceImporter, ...]:
    """What needs nothing but the file: a PyTorch module in KernelBench's format, then a JAX
    function (which accepts any file that imports jax)."""
    return (TorchModuleImporter(), JaxFunctionImporter())


def detecting(path: Path, source: str, importers: Sequence[SourceImporter]) -> list[SourceImporter]:
    """The importers that recognise this file, in order; TaskImportError naming the kinds tried
    when none does."""
    found = [importer for importer in importers if importer.detects(path, source)]
    if not found:
        kinds = ", ".join(importer.kind for importer in importers)
        raise TaskImportError(f"{path}: not a source kind tasks import knows (tried {kinds})")
    return found


def translate(
    path: Path, source: str, options: ImportOptions, importers: Sequence[SourceImporter]
) -> tuple[SourceImporter, PlainTaskSource]:
    """The first translation of the importers that recognise the file, and who made it; when
    all refuse, one TaskImportError with each one's reason."""
    refusals: list[str] = []
    for importer in detecting(path, source, importers):
        try:
            return importer, importer.translate(path, source, options)
        except TaskImportError as error:
            refusals.append(str(error))
    raise TaskImportError("; then ".join(refusals))
