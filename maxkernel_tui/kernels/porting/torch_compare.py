"""Checking a translation against the PyTorch module it came from, where torch is installed:
both run in a worker (`torch_worker`) on the same inputs and weights at small sizes, statement
by statement, and the first statement whose values disagree is named. No jax, no torch here.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from maxkernel_tui.kernels.derive.rules import shrunk_sizes
from maxkernel_tui.kernels.derive.sites import code_divisors, function
from maxkernel_tui.kernels.porting.emit import render_reference
from maxkernel_tui.kernels.porting.sources import harness_sizes
from maxkernel_tui.kernels.porting.values import Translation
from maxkernel_tui.kernels.task import TaskImportError
from maxkernel_tui.kernels.workers import jax_worker_env, python_module_argv, sandbox_policy

WORKER_MODULE = "maxkernel_tui.kernels.porting.torch_worker"
TIMEOUT_S = 180.0
SMALLEST = 16  # sizes are halved while even and above this
NOT_COMPARED = (
    "not compared with PyTorch (torch is not installed; the optional extra `port` installs it)"
)


@dataclass(frozen=True)
class ComparisonRequest:
    """What the worker needs: the module's source, the sizes to run both at (the module's and
    `get_inputs`' integer constants of those names), the JAX reference (traced or not), and
    which reference input fills which PyTorch parameter."""

    module_source: str
    sizes: dict[str, int]
    reference: str
    # Per reference input, its name in state_dict() or None for a forward input; None: the
    # forward's inputs then the parameters in `named_parameters()` order.
    torch_paths: list[str | None] | None
    atol: float
    rtol: float


@dataclass(frozen=True)
class Comparison:
    """The worker's answer. `line` and `statement` name the first disagreement, if any."""

    agrees: bool
    max_abs_diff: float
    compared: int  # statements compared
    line: int | None = None
    statement: str | None = None
    detail: str = ""
    error: str | None = None


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def comparison_sizes(translation: Translation) -> dict[str, int]:
    """Small sizes for the comparison: each literal size constant halved while it is even and
    above `SMALLEST` (so divisibility by small powers of two and odd sizes are kept), and while
    the literals of the translated forward that divide it still do (a GroupNorm's 512 groups
    keep 8192 features at 512, not 16); equal sizes halve together."""
    literal = {
        name: value for name, (value, code) in translation.constants.items() if code == repr(value)
    }
    reference = ast.parse(render_reference(translation, "sizes"))
    return shrunk_sizes(
        literal, code_divisors(reference, function(reference, "get_inputs")), SMALLEST
    )


def at_sizes(translation: Translation, sizes: dict[str, int]) -> Translation:
    constants = {
        name: (sizes.get(name, value), repr(sizes[name]) if name in sizes else code)
        for name, (value, code) in translation.constants.items()
    }
    return replace(translation, constants=constants)


def run_comparison(request: ComparisonRequest, timeout_s: float = TIMEOUT_S) -> Comparison:
    """Runs the worker; any failure of the worker itself is a `Comparison` with `error`."""
    # the module's code runs there: sandboxed, in a private directory
    with tempfile.TemporaryDirectory(prefix="mkt-torch-") as private:
        policy = sandbox_policy(writable=(private,))
        try:
            done = subprocess.run(
                python_module_argv(WORKER_MODULE),
                input=json.dumps(asdict(request)),
                capture_output=True,
                text=True,
                env=dict(jax_worker_env(), TMPDIR=private, **policy.to_env()),
                cwd=private,
                timeout=timeout_s,
                start_new_session=True,
                check=False,
            )
        except subprocess.TimeoutExpired:
            error = f"the comparison took over {timeout_s} s"
            return Comparison(False, float("nan"), 0, error=error)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return Comparison(False, float("nan"), 0, error=f"the comparison worker failed: {tail}")
    return Comparison(**json.loads(lines[-1]))


def compare(
    source: str,
    translation: Translation,
    atol: float,
    rtol: float,
    sizes: dict[str, int] | None = None,
) -> tuple[dict[str, int], Comparison]:
    """The comparison at `sizes` (the task's `check` sizes when known; small ones otherwise)."""
    sizes = comparison_sizes(translation) if sizes is None else sizes
    small = at_sizes(translation, sizes)
    request = ComparisonRequest(
        module_source=source,
        sizes=sizes,
        reference=render_reference(small, "traced", traced=True),
        torch_paths=[t.torch_path for t in translation.inputs],
        atol=atol,
        rtol=rtol,
    )
    return sizes, run_comparison(request)


def compare_reference(
    harness: str, reference: str, atol: float, rtol: float
) -> tuple[dict[str, int], Comparison]:
    """A reference written for a file with a PyTorch harness (the porter's), compared with the
    harness's module at the harness's sizes shrunk; inputs by order (`ComparisonRequest`)."""
    module = ast.parse(reference)
    divisors = code_divisors(module, function(module, "get_inputs"))
    sizes = shrunk_sizes(harness_sizes(harness), divisors, SMALLEST)
    request = ComparisonRequest(harness, sizes, reference, None, atol, rtol)
    return sizes, run_comparison(request)


def describe_sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items()) or "its own sizes"


def compare_or_note(
    source: str, translation: Translation, atol: float, rtol: float, path: Path
) -> str:
    """The note for the task: not compared (no torch), or agreed; a `TaskImportError` naming
    the first diverging statement when they disagree."""
    if not torch_available():
        return NOT_COMPARED
    sizes, result = compare(source, translation, atol, rtol)
    shown = describe_sizes(sizes)
    if result.error:
        raise TaskImportError(f"{path}: could not compare with PyTorch at {shown}: {result.error}")
    if not result.agrees:
        line = source.splitlines()[result.line - 1].strip() if result.line else "?"
        raise TaskImportError(
            f"{path}: the JAX translation disagrees with PyTorch at {shown} (atol {atol}, "
            f"rtol {rtol}); first at line {result.line}: `{line}`: {result.detail}"
        )
    return (
        f"compared with PyTorch at {shown}: {result.compared} statements agree within atol "
        f"{atol}, rtol {rtol} (max |difference| {result.max_abs_diff:.2e}, measured)"
    )
