"""The operand precision of each matmul the built-in agent writes, and why. Imports jax: it runs
in the agent's worker process.

bf16 operands with f32 accumulation (one MXU pass) are tried first: the reference is evaluated
equation by equation with that matmul's operands rounded to bf16 and its sum kept in f32, which
is what the kernel's MXU does, and compared with the reference at full f32 precision (as the
harness computes it) within the task's tolerance on the check and heldout configurations and the
built-in tester's edge cases. Those shapes are small (K of a few hundred) and the kernel runs at
production's (K of thousands), where the rounding error is larger: the share of the tolerance
each configuration uses is projected to production's contraction depth and output count
(operand_precision.Depth) and must stay under PROJECTED_SHARE_LIMIT there too. Where that fails,
the matmul keeps f32 operands (Mosaic's default,
several passes), or Precision.HIGHEST where the reference asks for it; each matmul is raised
alone first, so a program whose one sensitive matmul needs f32 keeps bf16 on the others.
A convolution counts as one matmul: the implicit GEMM's matmuls share its precision.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.agents.builtin.operand_precision import (
    PROJECTED_SHARE_LIMIT,
    Depth,
    OperandPrecision,
    PrecisionChoice,
    operand_words,
    projected_share,
)
from maxkernel_tui.agents.builtin.tester import edge_proposals
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.evaluation.compare import compare_arrays
from maxkernel_tui.kernels.perf.primitive_names import CALL_BODIES
from maxkernel_tui.kernels.report.words import comparison_words
from maxkernel_tui.kernels.task import Task, TaskError

SEEDS = (0, 1)
# The equations a kernel runs on the MXU, one operand precision each, counted in program order
# (the built-in agent's convolution is an implicit GEMM: one matmul per chunk of output rows).
_MXU_PRIMITIVES = ("dot_general", "conv_general_dilated")


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
    SEEDS, with every matmul's operands rounded to bf16, on `sizes` (a configuration the task's
    CONFIGS gains for this: production's contraction depth on fewer images, say). Measured, not
    projected; the tolerance is `config`'s. TaskError where the reference cannot take them."""
    module = runtime.load_reference(task)
    task = runtime.with_extra_configs(task, module, {"measured": sizes})
    cases = _cases(task, module, "measured", matmuls)
    if not cases:
        raise TaskError(task.reference_path, f"the reference cannot take {sizes}")
    rounded = jnp.ones((max(matmuls, 1),), bool)
    return max(
        compare_arrays(np.asarray(got), np.asarray(want), task.tolerance(config)).tolerance_used
        for case in cases
        for got, want in zip(case.emulate(rounded), case.want, strict=True)
    )


def _content_key(task: Task) -> str:
    digest = hashlib.sha256(f"{task.folder} {task.tolerances}".encode())
    for path in task.defining_files:  # a JAXBench folder has no yaml
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _choose(task: Task, matmuls: int, asks_highest: Sequence[bool]) -> PrecisionChoice:
    if not matmuls:
        return PrecisionChoice((), "no matmul")
    emulation = _Emulation(task, matmuls)
    cheapest = (OperandPrecision.BF16,) * matmuls
    if emulation.passes(cheapest):
        return PrecisionChoice(
            cheapest,
            f"bf16 operands, f32 accumulation (one MXU pass): {emulation.where} stay within "
            f"the task's tolerance with them{emulation.projection}",
        )
    for choice in _raised_choices(matmuls, asks_highest):
        if emulation.passes(choice):
            raised = [str(i + 1) for i, p in enumerate(choice) if p != OperandPrecision.BF16]
            return PrecisionChoice(
                choice,
                f"matmul {', '.join(raised)} with f32 operands ({operand_words(choice)}): with "
                f"bf16 operands {emulation.where} leave the task's tolerance "
                f"({emulation.failure})",
            )
    fallback = tuple(_raised(h) for h in asks_highest)
    return PrecisionChoice(
        fallback,
        f"f32 operands ({operand_words(fallback)}): with bf16 operands {emulation.where} leave the "
        f"task's tolerance ({emulation.failure})",
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
    return OperandPrecision.HIGHEST if asks_highest else OperandPrecision.F32


@dataclass
class _Case:
    """One numerics configuration and seed: the reference's output at full precision, and the
    reference compiled once with a per-matmul flag that rounds that matmul's operands to bf16."""

    config: str
    want: list[Any]
    emulate: Callable[[jax.Array], list[Any]]
    depths: tuple[int, ...]  # each matmul's contraction depth, in program order
    elements: int  # the outputs' elements


class _Emulation:
    """The reference on every numerics configuration, at full precision and with chosen matmul
    operand precisions (f32 and HIGHEST are both emulated at full f32)."""

    def __init__(self, task: Task, matmuls: int) -> None:
        module = runtime.load_reference(task)
        with contextlib.suppress(TaskError):  # a task without named configurations: no edges
            task = runtime.with_extra_configs(task, module, dict(edge_proposals(task)))
        names = [c for c in runtime.config_names(task, module) if not c.startswith(BENCH)]
        self.task, self.matmuls = task, matmuls
        self.cases = [c for name in names for c in _cases(task, module, name, matmuls)]
        self.where = f"{', '.join(dict.fromkeys(names))} (seeds {', '.join(map(str, SEEDS))})"
        self.production = _production_shape(task, module)
        self.failure = ""
        self.projection = ""  # what the last passing choice was projected to, in words

    def passes(self, choice: tuple[OperandPrecision, ...]) -> bool:
        rounded = jnp.asarray([p == OperandPrecision.BF16 for p in choice] or [False], bool)
        worst: tuple[float, Depth] | None = None
        for case in self.cases:
            depth = self._depth(case, choice)
            for got, want in zip(case.emulate(rounded), case.want, strict=True):
                found = compare_arrays(
                    np.asarray(got), np.asarray(want), self.task.tolerance(case.config)
                )
                if not found.ok:
                    self.failure = f"{case.config}: {comparison_words(found)}"
                    return False
                if depth is None:
                    continue
                projected = projected_share(found.tolerance_used, depth)
                if projected > PROJECTED_SHARE_LIMIT:
                    self.failure = (
                        f"{case.config}: {found.tolerance_used:.0%} of the tolerance at K "
                        f"{depth.observed_k}, projected to {projected:.0%} at production's K "
                        f"{depth.production_k} and {depth.production_elements:,} outputs "
                        f"(the limit is {PROJECTED_SHARE_LIMIT:.0%})"
                    )
                    return False
                if worst is None or projected > worst[0]:
                    worst = (projected, depth)
        self.projection = (
            ""
            if worst is None
            else f", projected to {worst[0]:.0%} of it at production's contraction depth "
            f"(K {worst[1].production_k}, {worst[1].production_elements:,} outputs)"
        )
        return True

    def _depth(self, case: _Case, choice: tuple[OperandPrecision, ...]) -> Depth | None:
        """The bf16 matmul whose error grows most from this case to production; None when no
        matmul is rounded or production's shapes are unknown."""
        if self.production is None:
            return None
        production_depths, production_elements = self.production
        depths = [
            Depth(observed, production, case.elements, production_elements)
            for precision, observed, production in zip(
                choice, case.depths, production_depths, strict=False
            )
            if precision == OperandPrecision.BF16
        ]
        return max(depths, key=Depth.growth, default=None)


def _cases(task: Task, module: Any, config: str, matmuls: int) -> list[_Case]:
    """The configuration at every seed, compiled once; none when the reference cannot take it
    (an edge case it rejects is not a numerics failure). The reference at full precision is the
    same program with no matmul rounded."""
    try:
        inputs = [runtime.make_inputs(task, module, config, seed) for seed in SEEDS]
        dynamic, static = inputs[0]
        closed = jax.make_jaxpr(lambda *d: module.computation(*d, *static))(*dynamic)
    except Exception:
        return []
    depths, elements = tuple(contraction_depths(closed.jaxpr)), _elements(closed)

    @jax.jit
    def emulate(rounded: jax.Array, *args: Any) -> list[Any]:
        with jax.default_matmul_precision("highest"):
            return _eval_jaxpr(closed.jaxpr, closed.consts, args, rounded, itertools.count())

    full = jnp.zeros((max(matmuls, 1),), bool)
    cases = []
    for dynamic, _ in inputs:
        leaves = jax.tree.leaves(dynamic)
        try:
            want = emulate(full, *leaves)
        except Exception:
            return []
        cases.append(_Case(config, want, _on_inputs(emulate, leaves), depths, elements))
    return cases


def _production_shape(task: Task, module: Any) -> tuple[tuple[int, ...], int] | None:
    """Each matmul's contraction depth at production shapes (the deepest of several production
    configurations) and the most output elements, from shapes alone (no inputs are made); None
    when production shapes do not trace."""
    found: list[tuple[list[int], int]] = []
    for name in runtime.config_names(task, module):
        if not name.startswith(BENCH):
            continue
        try:
            specs, static = runtime.input_specs(task, module, name)
            closed = jax.make_jaxpr(lambda *d, s=static: module.computation(*d, *s))(*specs)
        except Exception:
            return None
        found.append((contraction_depths(closed.jaxpr), _elements(closed)))
    if not found:
        return None
    depths = tuple(
        max(column) for column in itertools.zip_longest(*(d for d, _ in found), fillvalue=0)
    )
    return depths, max(elements for _, elements in found)


def contraction_depths(jaxpr: Any) -> list[int]:
    """The contraction depth of each matmul and convolution, in the order _eval_jaxpr meets
    them: a dot's contracted size; a convolution's input features times its window (the implicit
    GEMM's taps all add into one sum)."""
    depths = []
    for eqn in jaxpr.eqns:
        body = eqn.params.get(CALL_BODIES.get(eqn.primitive.name, ""))
        if eqn.primitive.name == "dot_general":
            (lhs_contracting, _), _ = eqn.params["dimension_numbers"]
            shape = eqn.invars[0].aval.shape
            depths.append(math.prod(shape[d] for d in lhs_contracting))
        elif eqn.primitive.name == "conv_general_dilated":
            rhs_spec = eqn.params["dimension_numbers"].rhs_spec  # (out, in, *window)
            shape = eqn.invars[1].aval.shape
            depths.append(math.prod(shape[d] for d in rhs_spec[1:]))
        elif body is not None:
            depths += contraction_depths(getattr(body, "jaxpr", body))
    return depths


def _elements(closed: Any) -> int:
    return sum(math.prod(v.aval.shape) for v in closed.jaxpr.outvars)


def _on_inputs(emulate: Callable[..., list[Any]], leaves: list[Any]) -> Callable[[jax.Array], Any]:
    return lambda rounded: emulate(rounded, *leaves)


def _eval_jaxpr(
    jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], rounded: jax.Array, counter: Any
) -> list[Any]:
    """The jaxpr equation by equation; the n-th matmul or convolution with bf16 operands where
    `rounded[n]` (any beyond the flags at full precision)."""
    env: dict[Any, Any] = {}

    def read(var: Any) -> Any:
        return var.val if hasattr(var, "val") else env[var]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        body = eqn.params.get(CALL_BODIES.get(eqn.primitive.name, ""))
        if eqn.primitive.name in _MXU_PRIMITIVES:
            index = next(counter)
            flag = rounded[index] if index < rounded.shape[0] else False
            # one branch runs (jnp.where would run both matmuls, the dearest part of the check)
            results = [
                jax.lax.cond(
                    flag,
                    partial(_on_mxu, eqn, bf16=True),
                    partial(_on_mxu, eqn, bf16=False),
                    values,
                )
            ]
        elif body is not None:  # a closed jaxpr (jit, custom_jvp) or an open one (remat)
            inner, consts = (body.jaxpr, body.consts) if hasattr(body, "consts") else (body, [])
            results = _eval_jaxpr(inner, consts, values, rounded, counter)
        else:
            out = eqn.primitive.bind(*values, **eqn.params)
            results = list(out) if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, results, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _on_mxu(eqn: Any, values: list[Any], bf16: bool) -> Any:
    """A matmul or convolution equation at full f32, or with bf16 operands and f32 sums."""
    lhs, rhs = values
    if bf16 and jnp.issubdtype(lhs.dtype, jnp.floating):
        lhs, rhs = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    highest = jax.lax.Precision.HIGHEST
    params = dict(eqn.params, precision=(highest, highest), preferred_element_type=jnp.float32)
    return eqn.primitive.bind(lhs, rhs, **params).astype(eqn.outvars[0].aval.dtype)
