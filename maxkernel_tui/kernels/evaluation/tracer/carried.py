"""A program the tracer carried (program_transport), loaded where it is used and checked against
the task there: its inputs and outputs must be the task's at its configuration, so a program
for other shapes or of another signature is refused before anything runs or measures it. Used by
the judge (evaluation/judge/worker.py) and the profile (evaluation/profiling/worker.py).
Imports jax.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
from jax.extend.core import ClosedJaxpr

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.tracer.transport import NotTransportable, load_program
from maxkernel_tui.kernels.task import TaskFormat


class ProgramRefused(Exception):
    """A carried program not to be run or measured; the message says why."""


def checked_program(file: Path, task: Any, reference: Any, config: str, where: str) -> ClosedJaxpr:
    """The program in `file`, once its inputs and outputs are `task`'s at `config` (`where`
    names that configuration in messages); ProgramRefused otherwise."""
    try:
        program = load_program(file.read_bytes())
    except (NotTransportable, OSError) as error:
        raise ProgramRefused(f"its program at {where} is refused: {error}") from None
    specs, _, expected = runtime.io_specs(task, reference, config)
    inputs = jax.tree.leaves(specs)
    if _kinds(program.in_avals) != _kinds(inputs):
        raise ProgramRefused(
            f"its program at {where} takes {avals_text(program.in_avals)}, "
            f"not the task's inputs {avals_text(inputs)}"
        )
    if _kinds(program.out_avals) != _kinds(expected) and not widened_outputs(
        task, program.out_avals, expected
    ):
        raise ProgramRefused(
            f"outputs differ from the reference's at {where}: "
            f"{avals_text(program.out_avals)} instead of {avals_text(expected)}"
        )
    return program


def checked_backward(
    file: Path, task: Any, reference: Any, config: str, where: str, at: tuple[int, ...]
) -> ClosedJaxpr:
    """The backward program in `file` (evaluation/gradients.py), once it takes the task's
    inputs and one cotangent per reference output at `config` and gives one gradient of each
    requested parameter's type; ProgramRefused otherwise."""
    try:
        program = load_program(file.read_bytes())
    except (NotTransportable, OSError) as error:
        raise ProgramRefused(f"its backward program at {where} is refused: {error}") from None
    specs, _, expected = runtime.io_specs(task, reference, config)
    inputs = [*jax.tree.leaves(specs), *expected]
    wanted = [specs[position] for position in at]
    if _kinds(program.in_avals) != _kinds(inputs):
        raise ProgramRefused(
            f"its backward program at {where} takes {avals_text(program.in_avals)}, not the "
            f"task's inputs and the outputs' cotangents {avals_text(inputs)}"
        )
    if _kinds(program.out_avals) != _kinds(wanted):
        raise ProgramRefused(
            f"its gradients at {where} are {avals_text(program.out_avals)}, not those of "
            f"{', '.join(task.gradients)} ({avals_text(wanted)})"
        )
    return program


def widened_outputs(task: Any, outputs: Any, expected: Any) -> str | None:
    """On a task in JAXBench's native format, outputs of the reference's shapes but of another
    floating type are compared by value, as JAXBench's own harness compares a kernel with its
    baseline (pallas_eval/eval_harness.py: both cast to float32, then allclose): its MLA expert
    returns float32 where the baseline returns bfloat16. A sentence saying so; None where the
    types agree or the task is not JAXBench's (there the reference's types are the contract)."""
    if task.source_format != TaskFormat.JAXBENCH or len(outputs) != len(expected):
        return None
    pairs = list(zip(outputs, expected, strict=True))
    if any(a.shape != b.shape or not (_floating(a) and _floating(b)) for a, b in pairs):
        return None
    differing = [(a, b) for a, b in pairs if a.dtype != b.dtype]
    if not differing:
        return None
    got = ", ".join(str(a.dtype) for a, _ in differing)
    want = ", ".join(str(b.dtype) for _, b in differing)
    return (
        f"outputs {got} where the baseline's are {want}: compared by value, as JAXBench's "
        "harness compares (both cast to float32, then allclose)"
    )


def _floating(aval: Any) -> bool:
    return bool(jax.numpy.issubdtype(aval.dtype, jax.numpy.floating))


def avals_text(avals: Any) -> str:
    """Types and shapes, as `float32[256, 512], int32[8]`."""
    return ", ".join(f"{a.dtype}{list(a.shape)}" for a in avals)


def _kinds(avals: Any) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(a.shape), str(a.dtype)) for a in avals]
