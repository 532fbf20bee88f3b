"""The operand precision of each matmul the built-in agent writes, and why. Imports jax: it runs
in the agent's worker process.

bf16 operands with f32 accumulation (one MXU pass) are tried first: the reference is evaluated
equation by equation with that matmul's operands rounded to bf16 and its sum kept in f32, which
is what the kernel's MXU does, and compared with the reference at full f32 precision (as the
harness computes it) within the task's tolerance on the check and heldout configurations and the
built-in tester's edge cases. Those shapes are small (K of a few hundred) and the kernel runs at
production's (K of thousands), where the rounding error is larger: the share of the tolerance
each configuration uses is projected to production's contraction depth and output count
(kernels/rounding_depth.py) and must stay under PROJECTED_SHARE_LIMIT there too; the emulation
is kernels/evaluation/matmul_rounding.py's, which the profile shares. Where that fails, the
matmul takes its f32 operands in three bf16 passes (each split into a high and a low bf16
part: Mosaic's default precision is one bf16 pass, so f32 operands left as they are would not
do), or Precision.HIGHEST where the reference asks for it; each matmul is raised alone first,
so a program whose one sensitive matmul needs f32 keeps bf16 on the others. A convolution
counts as one matmul: the implicit
GEMM's matmuls share its precision.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence

import jax.numpy as jnp
import numpy as np

from maxkernel_tui.agents.builtin.operand_precision import (
    OperandPrecision,
    PrecisionChoice,
    operand_words,
)
from maxkernel_tui.agents.builtin.tester import edge_proposals
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.evaluation.compare import compare_arrays
from maxkernel_tui.kernels.evaluation.matmul_rounding import Emulation, MxuRounding, cases
from maxkernel_tui.kernels.report.reasons import Comparison
from maxkernel_tui.kernels.task import Task, TaskError


def choose_precisions(task: Task, matmuls: int, asks_highest: Sequence[bool]) -> PrecisionChoice:
    """The cheapest precision per matmul whose numerics pass (module docstring), kept per task
    content for the life of the process. `asks_highest`: per matmul, whether the reference
    states Precision.HIGHEST (kept as its f32 fallback)."""
    key = (_content_key(task), matmuls, tuple(asks_highest))
    if key not in _CHOSEN:
        _CHOSEN[key] = _choose(task, matmuls, asks_highest)
    return _CHOSEN[key]


_CHOSEN: dict[tuple[str, int, tuple[bool, ...]], PrecisionChoice] = {}


def bf16_share(task: Task, config: str, sizes: dict[str, int], matmuls: int) -> float:
    """The share of `task`'s tolerance at `config` the reference uses, at its worst element over
    the rounding check's seeds, with every matmul's operands rounded to bf16, on `sizes` (a
    configuration the task's CONFIGS gains for this: production's contraction depth on fewer
    images, say). Measured, not projected; the tolerance is `config`'s. TaskError where the
    reference cannot take them."""
    module = runtime.load_reference(task)
    task = runtime.with_extra_configs(task, module, {"measured": sizes})
    measured = cases(task, module, "measured", matmuls)
    if not measured:
        raise TaskError(task.reference_path, f"the reference cannot take {sizes}")
    rounded = jnp.full((max(matmuls, 1),), MxuRounding.BF16, jnp.int32)
    return max(
        _share(compare_arrays(np.asarray(got), np.asarray(want), task.tolerance(config)))
        for case in measured
        for got, want in zip(case.emulate(rounded), case.want, strict=True)
    )


def _share(found: Comparison) -> float:
    """The tolerance a comparison used; unbounded for one that failed before any difference
    was taken (NaN outputs, another shape)."""
    return found.tolerance_used if found.mismatch is None else math.inf


def _content_key(task: Task) -> str:
    digest = hashlib.sha256(f"{task.folder} {task.tolerances}".encode())
    for path in task.defining_files:  # a JAXBench folder has no yaml
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _choose(task: Task, matmuls: int, asks_highest: Sequence[bool]) -> PrecisionChoice:
    if not matmuls:
        return PrecisionChoice((), "no matmul")
    emulation = Emulation(task, matmuls, edge_proposals(task))
    cheapest = (OperandPrecision.BF16,) * matmuls
    if emulation.passes(_rounded(cheapest)):
        return PrecisionChoice(
            cheapest,
            f"bf16 operands, f32 accumulation (one MXU pass): {emulation.where} stay within "
            f"the task's tolerance with them{emulation.projection}",
        )
    bf16_failure = emulation.failure
    for choice in _raised_choices(matmuls, asks_highest):
        if emulation.passes(_rounded(choice)):
            raised = [str(i + 1) for i, p in enumerate(choice) if p != OperandPrecision.BF16]
            return PrecisionChoice(
                choice,
                f"matmul {', '.join(raised)} with f32 operands ({operand_words(choice)}): with "
                f"bf16 operands {emulation.where} leave the task's tolerance ({bf16_failure})",
            )
    raised_all = tuple(_raised(h) for h in asks_highest)
    if emulation.passes(_rounded(raised_all)):
        return PrecisionChoice(
            raised_all,
            f"f32 operands ({operand_words(raised_all)}): with bf16 operands {emulation.where} "
            f"leave the task's tolerance ({bf16_failure})",
        )
    exact = (OperandPrecision.HIGHEST,) * matmuls
    return PrecisionChoice(
        exact,
        f"f32 operands ({operand_words(exact)}): with three bf16 passes {emulation.where} leave "
        f"the task's tolerance ({emulation.failure})",
    )


def _raised_choices(
    matmuls: int, asks_highest: Sequence[bool]
) -> Iterator[tuple[OperandPrecision, ...]]:
    """One matmul raised to f32 at a time (to HIGHEST where the reference asks for it), then all
    of them."""
    raised = [_raised(h) for h in asks_highest]
    for index in range(matmuls) if matmuls > 1 else ():
        choice = [OperandPrecision.BF16] * matmuls
        choice[index] = raised[index]
        yield tuple(choice)


def _raised(asks_highest: bool) -> OperandPrecision:
    """A matmul's operands raised to f32: at HIGHEST where the reference asks for it."""
    return OperandPrecision.HIGHEST if asks_highest else OperandPrecision.BF16X3


def _rounded(choice: Sequence[OperandPrecision]) -> list[MxuRounding]:
    """How each matmul's operands are rounded, as the emulation reads a choice."""
    return [_ROUNDINGS[p] for p in choice]


_ROUNDINGS = {
    OperandPrecision.BF16: MxuRounding.BF16,
    OperandPrecision.BF16X3: MxuRounding.BF16X3,
    OperandPrecision.HIGHEST: MxuRounding.EXACT,
}
