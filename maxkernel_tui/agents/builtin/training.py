"""Recognising a training task's family from the reference's program, for the backward pieces.

A task that asks for gradients gets a kernel from pieces/backward/ only when its reference is
one of the families those pieces differentiate: RMSNorm (no matmul; rsqrt of a mean of
squares, a 1-D scale), a matmul with a GELU epilogue (one matmul; tanh or erf after it),
softmax cross-entropy (no matmul; max, exp, sum, log over the rows of float logits, picked at
int labels) and attention (attention.py's recogniser; one head per key head, no bias, f32
logits). The roles come from the program (which input flows where, never names, ids or sizes)
and the reading is confirmed by running it against the reference at check shapes. Anything
else: CannotPlan saying the built-in agent cannot write the backward of this task.
Imports jax (it runs the reference).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.agents.builtin.attention import recognise_attention
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Program, Var
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.task import Task

NO_BACKWARD = "the built-in agent cannot write the backward of this task"

Option = float | bool | str


class TrainingFamily(StrEnum):
    RMSNORM = "RMSNorm"
    GEMM_GELU = "matmul + GELU"
    CROSS_ENTROPY = "softmax cross-entropy"
    FLASH_ATTENTION = "flash attention"


class Reduction(StrEnum):
    """How a loss's rows become its result (the cross-entropy piece's `reduction`)."""

    MEAN = "mean"
    SUM = "sum"
    NONE = "none"


@dataclass(frozen=True)
class TrainingSpec:
    """A family, the positions of its operands among the dynamic arguments (in the order its
    piece takes them), which of them it differentiates, the output's dtype, and the piece's
    keyword options."""

    family: TrainingFamily
    operands: tuple[int, ...]
    differentiable: tuple[int, ...]
    out_dtype: np.dtype
    options: tuple[tuple[str, Option], ...] = ()


def recognise_training(program: Program, task: Task) -> TrainingSpec:
    """The family whose backward piece fits the reference, or CannotPlan (NO_BACKWARD: why)."""
    dots = [eqn for eqn in program.eqns if eqn.primitive == "dot_general"]
    primitives = {eqn.primitive for eqn in program.eqns}
    if len(program.outputs) != 1 or not isinstance(program.outputs[0], Var):
        raise CannotPlan(f"{NO_BACKWARD}: the reference has no single array result")
    if len(dots) == 2:
        spec = _attention(program, task)
    elif len(dots) == 1 and primitives & {"tanh", "erf"}:
        spec = _gemm_gelu(program, dots[0])
    elif not dots and "rsqrt" in primitives:
        spec = _rmsnorm(program)
    elif not dots and {"exp", "log", "reduce_max", "reduce_sum"} <= primitives:
        spec = _cross_entropy(program)
    else:
        raise CannotPlan(
            f"{NO_BACKWARD}: it is none of the families with a backward piece (RMSNorm, a "
            "matmul with a GELU epilogue, softmax cross-entropy, attention)"
        )
    wanted = [program.arg_names.index(name) for name in task.gradients]
    if any(position not in spec.differentiable for position in wanted):
        raise CannotPlan(
            f"{NO_BACKWARD}: its {spec.family} piece differentiates "
            f"{', '.join(program.arg_names[i] for i in spec.differentiable)}, not all of "
            f"{', '.join(task.gradients)}"
        )
    if not _reproduces_reference(spec, task):
        raise CannotPlan(
            f"{NO_BACKWARD}: it looks like {spec.family}, but that reading does not reproduce "
            "the reference at check shapes"
        )
    return spec


def _position(program: Program, operand: object) -> int | None:
    """Which dynamic argument a value is, through views and casts (None: not an input)."""
    producers = {o: eqn for eqn in program.eqns for o in eqn.outputs}
    while isinstance(operand, Var) and operand not in program.inputs and operand in producers:
        eqn = producers[operand]
        if eqn.primitive not in ("convert_element_type", "reshape", "broadcast_in_dim"):
            return None
        operand = eqn.inputs[0]
    return (
        program.inputs.index(operand)
        if isinstance(operand, Var) and operand in program.inputs
        else None
    )


def _output_dtype(program: Program) -> np.dtype:
    output = program.outputs[0]
    assert isinstance(output, Var)
    return np.dtype(output.dtype)


def _rmsnorm(program: Program) -> TrainingSpec:
    rows = [i for i, v in enumerate(program.inputs) if len(v.bench_shape) >= 2]
    scales = [i for i, v in enumerate(program.inputs) if len(v.bench_shape) == 1]
    if len(rows) != 1 or len(scales) != 1 or len(program.inputs) != 2:
        raise CannotPlan(f"{NO_BACKWARD}: an rsqrt without one input of rows and one scale")
    eps = _constant_before(program, "rsqrt", "add")
    return TrainingSpec(
        TrainingFamily.RMSNORM,
        (rows[0], scales[0]),
        (rows[0], scales[0]),
        _output_dtype(program),
        (("eps", eps),),
    )


def _constant_before(program: Program, primitive: str, adds: str) -> float:
    """The constant `adds`-ed to the operand of the first `primitive` (RMSNorm's epsilon)."""
    producers = {o: eqn for eqn in program.eqns for o in eqn.outputs}
    target = next(eqn for eqn in program.eqns if eqn.primitive == primitive)
    before = producers.get(target.inputs[0]) if isinstance(target.inputs[0], Var) else None
    constants = [] if before is None or before.primitive != adds else before.inputs
    found = [c.bench for c in constants if isinstance(c, Literal)]
    return float(found[0]) if found else 0.0


def _gemm_gelu(program: Program, dot: Eqn) -> TrainingSpec:
    lhs, rhs = (_position(program, operand) for operand in dot.inputs)
    (contracting, batch) = dot.params["dimension_numbers"]
    if lhs is None or rhs is None or batch != ((), ()) or contracting != ((1,), (0,)):
        raise CannotPlan(f"{NO_BACKWARD}: its matmul is not x (rows, depth) times w (depth, cols)")
    approximate = any(eqn.primitive == "tanh" for eqn in program.eqns)
    return TrainingSpec(
        TrainingFamily.GEMM_GELU,
        (lhs, rhs),
        (lhs, rhs),
        _output_dtype(program),
        (("approximate", approximate),),
    )


def _cross_entropy(program: Program) -> TrainingSpec:
    floats = [i for i, v in enumerate(program.inputs) if jnp.issubdtype(v.dtype, jnp.floating)]
    ints = [i for i, v in enumerate(program.inputs) if jnp.issubdtype(v.dtype, jnp.integer)]
    if len(floats) != 1 or len(ints) != 1 or len(program.inputs[floats[0]].bench_shape) != 2:
        raise CannotPlan(f"{NO_BACKWARD}: no 2-D float logits with int labels")
    ndim = len(program.outputs[0].bench_shape)  # type: ignore[union-attr]
    # a per-row loss, or a scalar: a mean divides at the end, a sum does not (the reading is
    # then confirmed against the reference)
    divides = any(eqn.primitive == "div" for eqn in program.eqns[-2:])
    reduction = Reduction.NONE if ndim == 1 else Reduction.MEAN if divides else Reduction.SUM
    return TrainingSpec(
        TrainingFamily.CROSS_ENTROPY,
        (floats[0], ints[0]),
        (floats[0],),
        _output_dtype(program),
        (("reduction", reduction),),
    )


def _attention(program: Program, task: Task) -> TrainingSpec:
    try:
        spec = recognise_attention(program, task)
    except CannotPlan as problem:
        raise CannotPlan(f"{NO_BACKWARD}: {problem}") from None
    query, key = program.inputs[spec.query], program.inputs[spec.key]
    heads_axis = 2 if spec.seq_first else 1
    if spec.bias is not None or query.bench_shape[heads_axis] != key.bench_shape[heads_axis]:
        raise CannotPlan(
            f"{NO_BACKWARD}: the attention backward piece takes one key head per query head "
            "and no bias"
        )
    if np.dtype(spec.logits_dtype) != np.float32:
        raise CannotPlan(f"{NO_BACKWARD}: the reference rounds its logits below f32")
    head_dim = query.bench_shape[-1]
    options: tuple[tuple[str, Option], ...] = (
        ("scale", float(spec.scale_at(head_dim) or 1.0)),
        ("causal", spec.causal),
        ("mask_value", float(spec.mask_value)),
        ("seq_first", spec.seq_first),
    )
    if spec.scale_per_dim and spec.scale is not None:
        options = (("scale_per_dim", float(spec.scale)), *options[1:])
    operands = (spec.query, spec.key, spec.value)
    return TrainingSpec(
        TrainingFamily.FLASH_ATTENTION, operands, operands, _output_dtype(program), options
    )


def reading(spec: TrainingSpec) -> Callable[..., Any]:
    """The family as plain jnp, on the spec's operands: what the kernels compute."""
    options = dict(spec.options)
    out = spec.out_dtype
    if spec.family is TrainingFamily.RMSNORM:

        def rmsnorm(x: Any, scale: Any) -> Any:
            x32 = x.astype(jnp.float32)
            r = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + float(options["eps"]))
            return (x32 * r).astype(out) * scale

        return rmsnorm
    if spec.family is TrainingFamily.GEMM_GELU:

        def gemm_gelu(x: Any, w: Any) -> Any:
            z = jnp.dot(x, w, preferred_element_type=jnp.float32)
            return jax.nn.gelu(z, approximate=bool(options["approximate"])).astype(out)

        return gemm_gelu
    if spec.family is TrainingFamily.CROSS_ENTROPY:

        def cross_entropy(logits: Any, labels: Any) -> Any:
            logits = logits.astype(jnp.float32)
            loss = (
                jax.nn.logsumexp(logits, axis=-1)
                - jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
            )
            reduce = {Reduction.MEAN: jnp.mean, Reduction.SUM: jnp.sum}.get(
                Reduction(str(options["reduction"]))
            )
            return (reduce(loss) if reduce else loss).astype(out)

        return cross_entropy

    def attention(q: Any, k: Any, v: Any) -> Any:
        if options["seq_first"]:
            q, k, v = (jnp.swapaxes(t, 1, 2) for t in (q, k, v))
        scale = attention_scale(spec, q.shape[-1])
        logits = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
        if options["causal"]:
            seq = q.shape[2]
            logits = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), logits, -jnp.inf)
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        o = jnp.einsum("bhqk,bhkd->bhqd", probs, v, preferred_element_type=jnp.float32)
        o = o.astype(out)
        return jnp.swapaxes(o, 1, 2) if options["seq_first"] else o

    return attention


def attention_scale(spec: TrainingSpec, head_dim: int) -> float:
    """The factor on the logits at this head dimension."""
    options = dict(spec.options)
    if "scale_per_dim" in options:
        return float(options["scale_per_dim"]) * head_dim**-0.5
    return float(options["scale"])


def _reproduces_reference(spec: TrainingSpec, task: Task) -> bool:
    config = CHECK if CHECK in task.configs else task.configs[0]
    module = runtime.load_reference(task)
    dynamic, static = runtime.make_inputs(task, module, config, seed=0)
    expected = runtime.jitted_reference(module, len(dynamic), len(static))(*dynamic, *static)
    try:
        got = jax.jit(reading(spec))(*(dynamic[i] for i in spec.operands))
    except (ValueError, TypeError):  # a reading whose shapes do not even line up
        return False
    tolerance = task.tolerance(config)
    return (
        isinstance(expected, jax.Array)
        and got.shape == expected.shape
        and bool(
            jnp.allclose(
                got.astype(jnp.float32),
                expected.astype(jnp.float32),
                atol=tolerance.atol,
                rtol=tolerance.rtol,
            )
        )
    )
