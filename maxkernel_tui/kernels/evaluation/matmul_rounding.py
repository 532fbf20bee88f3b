"""The reference with chosen matmuls' operands rounded to bf16 (f32 sums), as a kernel's MXU
does at one pass, against the reference at full f32, within the task's tolerance: whether one
bf16 pass is enough at production's contraction depth (rounding_depth.py projects the share of
the tolerance seen at small shapes). The built-in agent chooses its operand precision with it
(agents/builtin/precision.py); the profile finds with it the XLA precision the task's tolerance
needs (`tolerance_precision`), the fair baseline beside XLA as the reference is written.
Imports jax: it runs in worker processes.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import BENCH
from maxkernel_tui.kernels.evaluation.compare import compare_arrays
from maxkernel_tui.kernels.perf.primitive_names import CALL_BODIES
from maxkernel_tui.kernels.perf.xla_model import XLA_DEFAULT, XLA_HIGH, XLA_HIGHEST, XlaPrecision
from maxkernel_tui.kernels.report.words import comparison_words
from maxkernel_tui.kernels.rounding_depth import PROJECTED_SHARE_LIMIT, Depth, projected_share
from maxkernel_tui.kernels.task import Task, TaskError

SEEDS = (0, 1)
# The equations a kernel runs on the MXU, one operand precision each, counted in program order
# (the built-in agent's convolution is an implicit GEMM: one matmul per chunk of output rows).
MXU_PRIMITIVES = ("dot_general", "conv_general_dilated")


class MxuRounding(enum.IntEnum):
    """How one matmul's operands reach the MXU in an emulation."""

    EXACT = 0  # full f32 (Precision.HIGHEST)
    BF16 = 1  # rounded to bf16, f32 sums: one pass (f32 operands at the default precision too)
    BF16X3 = 2  # each split into bf16 high and low parts, three products: three passes


@dataclass
class Case:
    """One numerics configuration and seed: the reference's output at full precision, and the
    reference compiled once with a per-matmul flag that rounds that matmul's operands to bf16."""

    config: str
    want: list[Any]
    emulate: Callable[[jax.Array], list[Any]]
    depths: tuple[int, ...]  # each matmul's contraction depth, in program order
    elements: int  # the outputs' elements


class Emulation:
    """The reference on every numerics configuration, at full precision and with chosen matmul
    operand roundings (MxuRounding). `edges`: edge-case
    configurations checked beside the task's own (the built-in tester's)."""

    def __init__(
        self, task: Task, matmuls: int, edges: Sequence[tuple[str, dict[str, Any]]] = ()
    ) -> None:
        module = runtime.load_reference(task)
        with contextlib.suppress(TaskError):  # a task without named configurations: no edges
            task = runtime.with_extra_configs(task, module, dict(edges))
        names = [c for c in runtime.config_names(task, module) if not c.startswith(BENCH)]
        self.task, self.matmuls = task, matmuls
        self.cases = [c for name in names for c in cases(task, module, name, matmuls)]
        self.where = f"{', '.join(dict.fromkeys(names))} (seeds {', '.join(map(str, SEEDS))})"
        self.production = production_shape(task, module)
        self.failure = ""
        self.projection = ""  # what the last passing choice was projected to, in words

    def passes(self, rounded: Sequence[MxuRounding]) -> bool:
        """Whether the reference stays within the tolerance, here and projected to production,
        with each matmul's operands (in program order) rounded as `rounded` says."""
        flags = jnp.asarray([int(r) for r in rounded] or [0], jnp.int32)
        worst: tuple[float, Depth] | None = None
        for case in self.cases:
            depth = self._depth(case, rounded)
            for got, want in zip(case.emulate(flags), case.want, strict=True):
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

    def _depth(self, case: Case, rounded: Sequence[MxuRounding]) -> Depth | None:
        """The rounded matmul whose error grows most from this case to production; None when no
        matmul is rounded or production's shapes are unknown."""
        if self.production is None:
            return None
        production_depths, production_elements = self.production
        depths = [
            Depth(observed, production, case.elements, production_elements)
            for rounding, observed, production in zip(
                rounded, case.depths, production_depths, strict=False
            )
            if rounding != MxuRounding.EXACT
        ]
        return max(depths, key=Depth.growth, default=None)


def cases(task: Task, module: Any, config: str, matmuls: int) -> list[Case]:
    """The configuration at every seed, compiled once; none when the reference cannot take it
    (an edge case it rejects is not a numerics failure). The reference at full precision is the
    same program with no matmul rounded."""
    try:
        inputs = [runtime.make_inputs(task, module, config, seed) for seed in SEEDS]
        dynamic, static = inputs[0]
        closed = jax.make_jaxpr(lambda *d: module.computation(*d, *static))(*dynamic)
    except Exception:
        return []
    depths, elements = tuple(contraction_depths(closed.jaxpr)), output_elements(closed)

    @jax.jit
    def emulate(rounded: jax.Array, *args: Any) -> list[Any]:
        with jax.default_matmul_precision("highest"):
            return _eval_jaxpr(closed.jaxpr, closed.consts, args, rounded, itertools.count())

    full = jnp.zeros((max(matmuls, 1),), jnp.int32)
    cases = []
    for dynamic, _ in inputs:
        leaves = jax.tree.leaves(dynamic)
        try:
            want = emulate(full, *leaves)
        except Exception:
            return []
        cases.append(Case(config, want, _on_inputs(emulate, leaves), depths, elements))
    return cases


def production_shape(task: Task, module: Any) -> tuple[tuple[int, ...], int] | None:
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
        found.append((contraction_depths(closed.jaxpr), output_elements(closed)))
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


def output_elements(closed: Any) -> int:
    return sum(math.prod(v.aval.shape) for v in closed.jaxpr.outvars)


def _on_inputs(emulate: Callable[..., list[Any]], leaves: list[Any]) -> Callable[[jax.Array], Any]:
    return lambda rounded: emulate(rounded, *leaves)


def _eval_jaxpr(
    jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], rounded: jax.Array, counter: Any
) -> list[Any]:
    """The jaxpr equation by equation; the n-th matmul or convolution with its operands rounded
    as `rounded[n]` (an MxuRounding) says (any beyond the flags at full precision)."""
    env: dict[Any, Any] = {}

    def read(var: Any) -> Any:
        return var.val if hasattr(var, "val") else env[var]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        body = eqn.params.get(CALL_BODIES.get(eqn.primitive.name, ""))
        if eqn.primitive.name in MXU_PRIMITIVES:
            index = next(counter)
            flag = rounded[index] if index < rounded.shape[0] else MxuRounding.EXACT
            # one branch runs (jnp.where would run every matmul, the dearest part of the check)
            branches = [partial(_on_mxu, eqn, rounding) for rounding in MxuRounding]
            results = [jax.lax.switch(flag, branches, values)]
        elif body is not None:  # a closed jaxpr (jit, custom_jvp) or an open one (remat)
            inner, consts = (body.jaxpr, body.consts) if hasattr(body, "consts") else (body, [])
            results = _eval_jaxpr(inner, consts, values, rounded, counter)
        else:
            out = eqn.primitive.bind(*values, **eqn.params)
            results = list(out) if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, results, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _on_mxu(eqn: Any, rounding: MxuRounding, values: list[Any]) -> Any:
    """A matmul or convolution equation with its operands rounded as `rounding` says, its sums
    in f32 (both are linear in each operand, so a split operand is the sum of its parts)."""
    lhs, rhs = values
    highest = jax.lax.Precision.HIGHEST
    params = dict(eqn.params, precision=(highest, highest), preferred_element_type=jnp.float32)

    def product(a: Any, b: Any) -> Any:
        return eqn.primitive.bind(a, b, **params)

    floating = jnp.issubdtype(lhs.dtype, jnp.floating)
    if rounding == MxuRounding.EXACT or not floating:
        out = product(lhs, rhs)
    else:
        lhs_high, rhs_high = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
        out = product(lhs_high, rhs_high)
        if rounding == MxuRounding.BF16X3:  # the low parts' products, as pieces/blocks.py adds
            lhs_low = (lhs - lhs_high.astype(lhs.dtype)).astype(jnp.bfloat16)
            rhs_low = (rhs - rhs_high.astype(rhs.dtype)).astype(jnp.bfloat16)
            out = (product(lhs_low, rhs_high) + product(lhs_high, rhs_low)) + out
    return out.astype(eqn.outvars[0].aval.dtype)


def written_precision(jaxpr: Any) -> XlaPrecision:
    """The precision XLA runs the reference's matmuls at as it is written: the most any matmul
    or convolution states (HIGHEST: six bf16 passes, HIGH: three), else XLA's default on a TPU
    (one bf16 pass)."""
    stated = " ".join(str(eqn.params.get("precision")) for eqn in _mxu_eqns(jaxpr))
    if "HIGHEST" in stated:
        return XLA_HIGHEST
    return XLA_HIGH if "HIGH" in stated else XLA_DEFAULT


def task_written_precision(task: Task) -> XlaPrecision:
    """`written_precision` of the task's reference at production shapes (traced, not run)."""
    module = runtime.load_reference(task)
    specs, static = runtime.input_specs(task, module, task.configs[0])
    closed = jax.make_jaxpr(lambda *dynamic: module.computation(*dynamic, *static))(*specs)
    return written_precision(closed.jaxpr)


def task_tolerance_precision(task: Task) -> XlaPrecision | None:
    """`tolerance_precision` of the task's reference at production shapes."""
    module = runtime.load_reference(task)
    specs, static = runtime.input_specs(task, module, task.configs[0])
    closed = jax.make_jaxpr(lambda *dynamic: module.computation(*dynamic, *static))(*specs)
    return tolerance_precision(task, module, closed.jaxpr)


def tolerance_precision(task: Task, module: Any, jaxpr: Any) -> XlaPrecision | None:
    """The fewest MXU passes XLA needs for the reference (`jaxpr`, at production shapes) to stay
    within the task's tolerance: one bf16 pass where every matmul passes with bf16 operands
    (Emulation, on the task's numerics configurations, projected to production's depth), else
    three, or six where the reference asks for HIGHEST (the built-in agent's rule, per program,
    without its tester's edge cases). None where no numerics configuration runs."""
    matmuls = len(contraction_depths(jaxpr))
    if not matmuls or all(_narrow_operands(e) for e in _mxu_eqns(jaxpr)):
        return XLA_DEFAULT  # bf16 operands take one pass as written: no fewer exists
    emulation = Emulation(task, matmuls)
    if not emulation.cases:
        return None
    if emulation.passes([MxuRounding.BF16] * matmuls):
        return XLA_DEFAULT
    highest = any("HIGHEST" in str(e.params.get("precision")) for e in _mxu_eqns(jaxpr))
    return XLA_HIGHEST if highest else XLA_HIGH


def _narrow_operands(eqn: Any) -> bool:
    """Both operands 16 bits wide or less (bf16, f16, int8): one MXU pass holds them exactly."""
    return all(np.dtype(v.aval.dtype).itemsize <= 2 for v in eqn.invars[:2])


def _mxu_eqns(jaxpr: Any) -> list[Any]:
    """The matmul and convolution equations of `jaxpr` and of the bodies it calls."""
    found = []
    for eqn in jaxpr.eqns:
        body = eqn.params.get(CALL_BODIES.get(eqn.primitive.name, ""))
        if eqn.primitive.name in MXU_PRIMITIVES:
            found.append(eqn)
        elif body is not None:
            found += _mxu_eqns(getattr(body, "jaxpr", body))
    return found
