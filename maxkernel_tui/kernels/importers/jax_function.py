"""The JAX-function importer: a user's function (and its file) as a plain task. No jax; the
source is read, never run, here.

Inputs come from `--args "bf16[8,4096,8192] f32[8192]"` (random arrays of those shapes, each
distinct size a named local of get_inputs so check/heldout can be derived from it) plus
`--static` literals, or from a `get_inputs()` in the file that returns `(dynamic, static)` with
its sizes as local integers, MaxKernel's plain convention. Tolerances default by dtype: 1e-2
for 16-bit floats (raised by the writer where the reference's own rounding needs more:
importers/calibration.py), 1e-3 (MaxKernel's default) otherwise; the task's notes say which.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from maxkernel_tui.kernels.importers import ImporterKind, ImportOptions, PlainTaskSource
from maxkernel_tui.kernels.task import TaskImportError

KIND = ImporterKind.JAX_FUNCTION
_ARG = re.compile(r"^([a-z]+[0-9]*)\[([0-9, ]*)\]$")
_TOKEN = re.compile(r"[^\s\[]+\[[^\]]*\]|\S+")  # a spec may hold spaces: i32[3, 5]
_DTYPES = {
    "bf16": "jnp.bfloat16",
    "f16": "jnp.float16",
    "f32": "jnp.float32",
    "i32": "jnp.int32",
    "i8": "jnp.int8",
    "bool": "jnp.bool_",
}
_LOW_PRECISION = ("bf16", "f16", "bfloat16", "float16")
LOW_PRECISION_TOLERANCE = 1e-2
DEFAULT_TOLERANCE = 1e-3
_ADDED = "# --- added by maxkernel-tui tasks import ---"


@dataclass(frozen=True)
class ArraySpec:
    dtype: str  # short name, a key of _DTYPES
    shape: tuple[int, ...]


def parse_args(text: str) -> list[ArraySpec]:
    """`bf16[8,4096,8192] f32[8192]` -> specs; TaskImportError naming a bad entry."""
    specs = []
    for token in _TOKEN.findall(text):
        match = _ARG.match(token)
        if match is None or match.group(1) not in _DTYPES:
            known = ", ".join(_DTYPES)
            raise TaskImportError(
                f"--args: {token!r} is not DTYPE[D0,D1,...] with DTYPE one of {known}"
            )
        dims = [d.strip() for d in match.group(2).split(",") if d.strip()]
        shape = tuple(int(d) for d in dims)
        if any(d <= 0 for d in shape):
            raise TaskImportError(f"--args: {token!r} has a size that is not positive")
        specs.append(ArraySpec(match.group(1), shape))
    if not specs:
        raise TaskImportError("--args names no arrays")
    return specs


class JaxFunctionImporter:
    """A Python file that imports jax, and one of its functions as the reference."""

    kind = KIND

    def detects(self, path: Path, source: str) -> bool:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return False
        return path.suffix == ".py" and _imports_jax(tree)

    def translate(self, path: Path, source: str, options: ImportOptions) -> PlainTaskSource:
        try:
            tree = ast.parse(source, filename=str(path))
        except SyntaxError as error:
            raise TaskImportError(f"{path}:{error.lineno}: does not parse: {error.msg}") from None
        name = _entry_function(path, tree, options.function)
        statics = _static_literals(options.static)
        if options.args is not None:
            specs = parse_args(options.args)
            inputs = _generated_get_inputs(specs, statics)
            dtypes = [spec.dtype for spec in specs]
        elif _has_function(tree, "get_inputs"):
            if options.static:
                raise TaskImportError(
                    "--static applies to --args; the file's get_inputs() gives its own static args"
                )
            inputs = ""
            dtypes = _dtype_words(source)
        else:
            raise TaskImportError(
                f"{path}: no get_inputs() in the file: say the inputs with --args "
                '"bf16[8,4096,8192] f32[8192]"'
            )
        atol, rtol, tolerance_note = _tolerance(options.tolerance, dtypes)
        by_dtype = options.tolerance is None and atol == LOW_PRECISION_TOLERANCE
        alias = "" if name == "computation" else f"\ncomputation = {name}\n"
        added = f"\n\n{_ADDED}\nimport jax\nimport jax.numpy as jnp\n{inputs}{alias}"
        reference = source.rstrip() + "\n" + (added if inputs or alias else "")
        return PlainTaskSource(
            task_id="",  # the writer names it after the output folder
            description=f"Imported from {path.name}: function `{name}`.",
            reference_py=reference,
            atol=atol,
            rtol=rtol,
            notes=(f"imported from {path} (function {name})",),
            tolerance_note=tolerance_note,
            calibrate_tolerance=by_dtype,
        )


def _imports_jax(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "jax" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "jax":
            return True
    return False


def _has_function(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body)


def _entry_function(path: Path, tree: ast.Module, wanted: str | None) -> str:
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    candidates = [f for f in functions if f != "get_inputs" and not f.startswith("_")]
    if wanted is None:
        if len(candidates) != 1:
            found = ", ".join(candidates) or "none"
            raise TaskImportError(f"{path}: say which function with --function (found {found})")
        return candidates[0]
    if wanted not in functions:
        raise TaskImportError(
            f"{path}: no top-level function {wanted!r} (found {', '.join(functions) or 'none'})"
        )
    if wanted != "computation" and "computation" in functions:
        raise TaskImportError(
            f"{path}: defines its own `computation`; import that one or rename it"
        )
    return wanted


def _static_literals(texts: tuple[str, ...]) -> list[str]:
    values = []
    for text in texts:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise TaskImportError(f"--static: {text!r} is not a Python literal") from None
        if not isinstance(value, (bool, int, float, str)) and value is not None:
            raise TaskImportError(f"--static: {text!r} is not a Python scalar")
        values.append(repr(value))
    return values


def _generated_get_inputs(specs: list[ArraySpec], statics: list[str]) -> str:
    """A plain get_inputs: each array's axis a named local (`x1_0`, axis 0 of the second
    array), one fixed key per array. Named by place, not by value: a 256x512 @ 512x256 GEMM has
    m = n = 256, and only tracing the function tells that m and n are free of each other
    while the two 512s meet in the contraction (kernels/tie_probe.py)."""
    lines = ["", "", "def get_inputs():"]
    lines += [
        f"    x{index}_{axis} = {size}"
        for index, spec in enumerate(specs)
        for axis, size in enumerate(spec.shape)
    ]
    arrays = []
    for index, spec in enumerate(specs):
        shape = "(" + "".join(f"x{index}_{axis}, " for axis in range(len(spec.shape))) + ")"
        lines.append(f"    x{index} = {_random_array(spec, shape, index)}")
        arrays.append(f"x{index}")
    lines.append(f"    return [{', '.join(arrays)}], [{', '.join(statics)}]")
    return "\n".join(lines) + "\n"


def _random_array(spec: ArraySpec, shape: str, index: int) -> str:
    key = f"jax.random.key({index})"
    dtype = _DTYPES[spec.dtype]
    if spec.dtype == "bool":
        return f"jax.random.bernoulli({key}, 0.5, {shape})"
    if spec.dtype.startswith("i"):
        return f"jax.random.randint({key}, {shape}, 0, 100, {dtype})"
    return f"jax.random.normal({key}, {shape}, {dtype})"


def _dtype_words(source: str) -> list[str]:
    return [word for word in _LOW_PRECISION if word in source]


def _tolerance(given: tuple[float, float] | None, dtypes: list[str]) -> tuple[float, float, str]:
    if given is not None:
        return given[0], given[1], f"tolerance atol {given[0]:g}, rtol {given[1]:g} (given)"
    if any(d in _LOW_PRECISION for d in dtypes):
        value = LOW_PRECISION_TOLERANCE
        why = "the default for 16-bit float inputs"
    else:
        value = DEFAULT_TOLERANCE
        why = "the default for 32-bit inputs (MaxKernel's)"
    return value, value, f"tolerance atol {value:g}, rtol {value:g}: {why}"
