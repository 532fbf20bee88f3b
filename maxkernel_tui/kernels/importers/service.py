"""One call for `tasks import` and the picker's import form: read the file, find its importer,
translate, write. No jax in this process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.kernels.description import TaskDescription
from maxkernel_tui.kernels.importers import ImporterKind, ImportOptions, SourceImporter
from maxkernel_tui.kernels.importers.registry import offline_importers, translate
from maxkernel_tui.kernels.importers.writer import write_task
from maxkernel_tui.kernels.limits import file_oversize_problem
from maxkernel_tui.kernels.loader import load_task
from maxkernel_tui.kernels.task import Task, TaskError, TaskImportError


@dataclass(frozen=True)
class ImportedTask:
    task: Task
    folder: Path
    kind: ImporterKind  # the importer that translated it
    description: TaskDescription
    notes: tuple[str, ...]


def import_task(
    path: Path,
    out: Path,
    options: ImportOptions,
    *,
    force: bool = False,
    importers: Sequence[SourceImporter] | None = None,
) -> ImportedTask:
    """The task folder written at `out`; TaskImportError with what went wrong (nothing written).
    `importers`: the source kinds to try, in order (default: the offline ones)."""
    if not path.is_file():
        raise TaskImportError(f"{path}: no such file")
    if too_large := file_oversize_problem(path, path.name):
        raise TaskImportError(f"{path}: {too_large}")
    source = path.read_text(encoding="utf-8")
    importer, translated = translate(
        path, source, options, offline_importers() if importers is None else importers
    )
    written = write_task(translated, out, force=force, kind=importer.kind)
    try:
        task = load_task(written.folder)
    except TaskError as error:  # the writer's own output must load; say so if it does not
        raise TaskImportError(f"the written task does not load: {error}") from None
    return ImportedTask(task, written.folder, importer.kind, written.description, written.notes)
