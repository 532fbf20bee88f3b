"""The importer of PyTorch modules in KernelBench's format (`class Model(nn.Module)`,
`get_inputs()`, `get_init_inputs()`): translated offline from the source into a plain task.
No jax, no torch in this process.

Where torch is installed, the translation is run beside the PyTorch module in a worker
(`porting.torch_compare`) and refused if they disagree; otherwise the task says it was not
compared with PyTorch.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

from maxkernel_tui.kernels.importers import ImporterKind, ImportOptions, PlainTaskSource
from maxkernel_tui.kernels.porting.emit import render_reference
from maxkernel_tui.kernels.porting.module_parse import is_module_file
from maxkernel_tui.kernels.porting.sources import SourceKind, kernel_source_kind
from maxkernel_tui.kernels.porting.torch_compare import compare_or_note
from maxkernel_tui.kernels.porting.translate import translate_module
from maxkernel_tui.kernels.porting.values import NEAR_SPREAD, Tensor
from maxkernel_tui.kernels.task import TaskImportError

DEFAULT_TOLERANCE = (1e-2, 1e-2)  # (atol, rtol) for float32, as JaxBench's KernelBench tasks
SOURCE_COPY = "source_module.py"
INIT_NOTE = (
    "parameters drawn from the distributions PyTorch initialises them with (from "
    "jax.random.key(0), not PyTorch's random stream)"
)
BATCH_NORM_NOTE = (
    "BatchNorm uses batch statistics (PyTorch's default training mode, which KernelBench runs)"
)
DROPOUT_NOTE = "dropout is the identity (eval mode)"


def mode_notes(operators: Sequence[str]) -> tuple[str, ...]:
    """What the reference assumes of the module's mode, for the operators it has (BatchNorm's
    statistics, dropout), so that a module with neither gets no such note."""
    names = [op.lower() for op in operators]
    notes = []
    if any(name.startswith(("batchnorm", "batch_norm")) for name in names):
        notes.append(BATCH_NORM_NOTE)
    if any("dropout" in name for name in names):
        notes.append(DROPOUT_NOTE)
    return tuple(notes)


def unused_kernel_note(path: Path, source: str) -> tuple[str, ...]:
    """A file that carries a Triton or CUDA kernel but whose Model.forward translated as plain
    PyTorch: the task is the PyTorch, and the kernel was never looked at (nor the porter asked)."""
    kind = kernel_source_kind(path, source)
    if kind is None:
        return ()
    name = "Triton" if kind == SourceKind.TRITON else "CUDA"
    return (
        f"the file's {name} kernel is not part of this task: Model.forward is plain PyTorch "
        "and was translated as written, without the porter",
    )


def near_constant_note(inputs: Sequence[Tensor]) -> tuple[str, ...]:
    """Which learned parameters are drawn around the constant PyTorch starts them at."""
    near = [tensor.name for tensor in inputs if tensor.init.around is not None]
    if not near:
        return ()
    return (
        f"learned parameters PyTorch starts at ones or zeros ({', '.join(near)}) are drawn "
        f"around that constant (plus N(0, 1) x {NEAR_SPREAD:g}), so that a kernel ignoring them "
        "fails",
    )


def task_id_of(path: Path) -> str:
    """The task id a file's stem gives (letters, digits and _)."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", path.stem).strip("_") or "module"


class TorchModuleImporter:
    kind = ImporterKind.PYTORCH_MODULE

    def detects(self, path: Path, source: str) -> bool:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return False
        return "torch" in source and is_module_file(tree)

    def translate(self, path: Path, source: str, options: ImportOptions) -> PlainTaskSource:
        task_id = task_id_of(path)
        try:
            translation = translate_module(source, task_id)
        except TaskImportError as error:
            raise TaskImportError(f"{path}: {error}") from None
        operators = ", ".join(dict.fromkeys(translation.operators))
        notes = (
            INIT_NOTE,
            *mode_notes(translation.operators),
            *near_constant_note(translation.inputs),
            *unused_kernel_note(path, source),
        )
        header = (
            f"JAX reference translated from the PyTorch module {path.name} by maxkernel-tui.\n\n"
            f"Operators: {operators}.\n"
            + "".join(f"{note[0].upper()}{note[1:]}.\n" for note in notes)
        )
        reference = render_reference(translation, header)
        atol, rtol = options.tolerance or DEFAULT_TOLERANCE
        comparison = compare_or_note(source, translation, atol, rtol, path)
        return PlainTaskSource(
            task_id=task_id,
            description=f"PyTorch module {path.name} ported to JAX ({operators})",
            reference_py=reference,
            atol=atol,
            rtol=rtol,
            notes=(*notes, comparison),
            extra_files={SOURCE_COPY: source},
        )
