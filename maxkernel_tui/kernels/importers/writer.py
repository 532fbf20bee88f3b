"""The shared writer of `tasks import`: a `PlainTaskSource` becomes a task folder in our format.
No jax in this process; the reference is validated in a worker.

It derives `check` and `heldout` from the production sizes (kernels/derive/), rewrites
reference.py with `CONFIGS` and `get_inputs(config, seed)` (still callable with no arguments,
so MaxKernel's harness reads the folder), writes `kernel_task.yaml` (with `input_gen_code`), has
the describe worker trace every configuration and run the reference on the derived ones (and, for
a 16-bit default tolerance, the rounding worker measure what the reference's own rounding
needs: importers/calibration.py), and only then moves the folder into place. Nothing is
overwritten without `force`.
"""

from __future__ import annotations

import ast
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from maxkernel_tui.kernels.derive.plan import Derivation, plan_derivation
from maxkernel_tui.kernels.derive.render import our_format
from maxkernel_tui.kernels.description import TaskDescription
from maxkernel_tui.kernels.importers import ImporterKind, PlainTaskSource
from maxkernel_tui.kernels.importers.calibration import calibrated, measure
from maxkernel_tui.kernels.sandbox.policy import XlaCache
from maxkernel_tui.kernels.task import IMPORTED_CATEGORY, REFERENCE_PY, TASK_YAML, TaskImportError
from maxkernel_tui.kernels.workers import (
    LineWorker,
    WorkerFailure,
    jax_worker_env,
    python_module_argv,
    sandbox_policy,
)

VALIDATE_TIMEOUT_S = 600.0
_TASK_ID = "task_id"


@dataclass(frozen=True)
class WrittenTask:
    folder: Path
    description: TaskDescription  # the worker's: shapes per configuration, reference times
    notes: tuple[str, ...]


def write_task(
    source: PlainTaskSource, out: Path, *, force: bool = False, kind: ImporterKind
) -> WrittenTask:
    """Write `source` as a task folder at `out`; TaskImportError (and nothing written) when it
    cannot be derived or validated, or `out` exists without `force`."""
    out = out.resolve()
    if out.exists() and not force:
        raise TaskImportError(f"{out} exists: pass --force to replace it")
    task_id = source.task_id or out.name
    tree = _parsed(source)
    derivation = plan_derivation(tree, "get_inputs")
    reference = _our_reference(source, derivation)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent if out.parent.is_dir() else None)
    )
    try:
        folder = staging / out.name
        folder.mkdir()
        for name, text in source.extra_files.items():
            (folder / Path(name).name).write_text(text, encoding="utf-8")
        description = _write_and_validate(folder, task_id, source, reference, kind)
        groups = tuple(tuple(group) for group in description.tie_groups)
        refined = plan_derivation(tree, "get_inputs", groups)
        if groups and refined.sizes != derivation.sizes:
            # equal sizes the reference does not tie may move apart in held-out: written so
            # when the reference traces at those sizes, else the plan without them stands
            apart = _our_reference(source, refined)
            try:
                description = _write_and_validate(folder, task_id, source, apart, kind)
                reference = apart
            except TaskImportError:
                description = _write_and_validate(folder, task_id, source, reference, kind)
        if source.calibrate_tolerance:
            source = _calibrated(source, folder, task_id, reference, kind)
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        folder.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return WrittenTask(out, description, source.all_notes)


def _write_and_validate(
    folder: Path, task_id: str, source: PlainTaskSource, reference: str, kind: ImporterKind
) -> TaskDescription:
    (folder / REFERENCE_PY).write_text(reference, encoding="utf-8")
    (folder / TASK_YAML).write_text(_yaml(task_id, source, reference, kind), encoding="utf-8")
    return validate_folder(folder)


def _parsed(source: PlainTaskSource) -> ast.Module:
    try:
        return ast.parse(source.reference_py)
    except SyntaxError as error:
        raise TaskImportError(
            f"the translated reference does not parse: {error.msg} at line {error.lineno}"
        ) from None


def _our_reference(source: PlainTaskSource, derivation: Derivation) -> str:
    try:
        return our_format(source.reference_py, derivation)
    except ValueError as error:
        raise TaskImportError(str(error)) from None


def _yaml(task_id: str, source: PlainTaskSource, reference: str, kind: ImporterKind) -> str:
    meta = {
        _TASK_ID: task_id,
        "description": source.description,
        "category": IMPORTED_CATEGORY,
        "operation": f"imported {kind}",
        "atol": source.atol,
        "rtol": source.rtol,
        "notes": list(source.all_notes),
        "input_gen_code": reference,
    }
    return str(yaml.safe_dump(meta, sort_keys=False, width=100))


def _calibrated(
    source: PlainTaskSource, folder: Path, task_id: str, reference: str, kind: ImporterKind
) -> PlainTaskSource:
    """`source` with its 16-bit default tolerance checked against the reference's own rounding
    (measured in a worker on the written folder), and the yaml rewritten to match."""
    found = calibrated(measure(folder), source.atol)
    source = replace(source, atol=found.tolerance, rtol=found.tolerance, tolerance_note=found.note)
    (folder / TASK_YAML).write_text(_yaml(task_id, source, reference, kind), encoding="utf-8")
    return source


def validate_folder(folder: Path) -> TaskDescription:
    """Shapes of every configuration (eval_shape) and a run of the reference on each derived
    one (finite outputs), in the describe worker; TaskImportError saying what failed."""
    worker = LineWorker(
        # --ties: which equal sizes the reference ties, for the CONFIGS written (tie_probe.py)
        python_module_argv("maxkernel_tui.kernels.describe", "--no-cost", "--ties"),
        jax_worker_env(),
        # the folder is still being written: nothing worth keeping in the compilation cache
        sandbox=sandbox_policy(readable=(folder,), xla_cache=XlaCache.OFF),
    )
    try:
        answer = worker.ask(str(folder), VALIDATE_TIMEOUT_S)
    except WorkerFailure as failure:
        raise TaskImportError(f"the reference could not be validated: {failure}") from None
    finally:
        worker.close()
    description = TaskDescription.from_json(answer)
    if description.error is not None:
        raise TaskImportError(f"the reference does not validate: {description.error}")
    return description
