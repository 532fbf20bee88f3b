"""Recognising attention in the reference's program: softmax(mask(scale * Q K^T + bias)) V.

The program must hold exactly two matmuls with a softmax between them (a max and a sum over the
same axis, an exponential); the operands trace back, through reshapes, to three 4-D inputs laid
out (batch, heads, seq, dim) or (batch, seq, heads, dim), with fewer key heads than query heads
allowed (query head h reads key head h // group). The scale, the mask (built from iota: a causal
mask) and its fill value, and an additive bias input come from the equations between the two
matmuls. Which matmul operand is the query, and whether the mask is causal, is then confirmed
by running both the reference and a plain jnp reading of the spec at check shapes: the agent
writes a flash-attention kernel only for a reading that reproduces the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Program, Var
from maxkernel_tui.agents.builtin.reading import reproduces_reference
from maxkernel_tui.kernels.task import Task

_VIEWS = ("reshape", "squeeze", "expand_dims")
# A fill value this negative is a mask, not data.
_MASK_THRESHOLD = -1e4


@dataclass(frozen=True)
class AttentionSpec:
    query: int  # positions among the dynamic arguments
    key: int
    value: int
    bias: int | None  # (heads, seq, seq) or (batch, heads, seq, seq), added after the scale
    seq_first: bool  # inputs laid out (batch, seq, heads, dim) rather than (batch, heads, seq, dim)
    causal: bool
    mask_value: float
    scale: float | None  # times head_dim ** -0.5 when `scale_per_dim`
    logits_dtype: np.dtype  # the dtype the reference rounds the logits to
    # The scale follows the head dimension (1/sqrt(head_dim)): the kernel reads it from the
    # query's shape, so that a configuration with another head dimension gets its own.
    scale_per_dim: bool = False

    def scale_at(self, head_dim: int) -> float | None:
        """The factor on the logits at this head dimension."""
        if self.scale is None or not self.scale_per_dim:
            return self.scale
        return self.scale * head_dim**-0.5


def recognise_attention(program: Program, task: Task) -> AttentionSpec:
    """The attention spec of the program, or CannotPlan saying what does not match."""
    dots = [eqn for eqn in program.eqns if eqn.primitive == "dot_general"]
    if len(dots) != 2:
        raise CannotPlan(f"not attention: {len(dots)} matmul(s), attention has two")
    first, second = dots
    producers = {o: eqn for eqn in program.eqns for o in eqn.outputs}
    chain = _between(program, first, second)
    if not {"exp", "reduce_max", "reduce_sum"} <= {eqn.primitive for eqn in chain}:
        raise CannotPlan("not attention: no softmax between the two matmuls")
    scores = [_input_of(program, producers, operand) for operand in first.inputs]
    values = [
        _input_of(program, producers, o)
        for o in second.inputs
        if not _depends_on(o, first, producers)
    ]
    query, key = scores
    value = values[0] if len(values) == 1 else None
    if query is None or key is None or value is None or len({query, key, value}) != 3:
        raise CannotPlan("not attention: the matmuls do not read three distinct inputs")
    seq = _repeated_dim(first.outputs[0].shape)
    seq_first = _seq_first(program, [query, key, value], seq)
    bias = _bias(program, chain, producers, {query, key, value})
    scale, per_dim = _scale(
        chain, first.outputs[0], program.dims.values(program.inputs[query].shape[-1])
    )
    base = AttentionSpec(
        query,
        key,
        value,
        bias,
        seq_first,
        _uses_iota(program),
        _mask_value(chain, producers),
        scale,
        first.outputs[0].dtype,
        per_dim,
    )
    for candidate in (base, replace(base, query=base.key, key=base.query)):
        if _reproduces_reference(candidate, program, task):
            return candidate
    raise CannotPlan(
        "looks like attention, but no reading of its layout, mask and scale reproduces the "
        "reference at check shapes"
    )


def read_softmax_core(program: Program, first: Eqn, second: Eqn) -> AttentionSpec | None:
    """The scale, mask and logits' rounding of a softmax between two matmuls whose operands the
    program computes (MLA's projections), as a spec over arguments 0, 1, 2 (queries, keys,
    values) laid out (batch, seq, heads, dim); None when no softmax lies between them. The
    caller confirms the reading by running it."""
    chain = _between(program, first, second)
    if not {"exp", "reduce_max", "reduce_sum"} <= {eqn.primitive for eqn in chain}:
        return None
    producers = {o: eqn for eqn in program.eqns for o in eqn.outputs}
    query = first.inputs[0]
    if not isinstance(query, Var):
        return None
    scale, per_dim = _scale(chain, first.outputs[0], program.dims.values(query.shape[-1]))
    masked = any(eqn.primitive == "select_n" for eqn in chain)
    mask_value = _mask_value(chain, producers)
    logits = first.outputs[0].dtype
    return AttentionSpec(0, 1, 2, None, True, masked, mask_value, scale, logits, per_dim)


def attention_as_read(spec: AttentionSpec, args: list[jax.Array]) -> jax.Array:
    """Plain jnp attention as the spec reads it, with the reference's rounding of the logits."""
    q, k, v = (args[i] for i in (spec.query, spec.key, spec.value))
    if spec.seq_first:
        q, k, v = (jnp.swapaxes(t, 1, 2) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
    logits = _rounded(jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32), spec)
    scale = spec.scale_at(q.shape[-1])
    if scale is not None:
        logits = _rounded(logits * scale, spec)
    if spec.bias is not None:
        logits = _rounded(logits + args[spec.bias].astype(jnp.float32), spec)
    if spec.causal:
        seq = logits.shape[-1]
        logits = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), logits, spec.mask_value)
    probs = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bhkd->bhqd", probs, v.astype(jnp.float32)).astype(q.dtype)
    return jnp.swapaxes(out, 1, 2) if spec.seq_first else out


def _rounded(logits: jax.Array, spec: AttentionSpec) -> jax.Array:
    return logits.astype(spec.logits_dtype).astype(jnp.float32)


def _reproduces_reference(spec: AttentionSpec, program: Program, task: Task) -> bool:
    if len(program.outputs) != 1:
        return False
    return reproduces_reference(lambda *args: attention_as_read(spec, list(args)), task)


def _between(program: Program, first: Eqn, second: Eqn) -> list[Eqn]:
    """Equations on the path from the first matmul's result to the second matmul."""
    reached = {first.outputs[0]}
    chain = []
    for eqn in program.eqns[program.eqns.index(first) + 1 : program.eqns.index(second)]:
        if any(isinstance(i, Var) and i in reached for i in eqn.inputs):
            chain.append(eqn)
            reached.update(o for o in eqn.outputs)
    return chain


def _depends_on(operand: Any, eqn: Eqn, producers: dict[Var, Eqn]) -> bool:
    pending = [operand]
    while pending:
        var = pending.pop()
        if not isinstance(var, Var):
            continue
        if any(var is o for o in eqn.outputs):
            return True
        if var in producers:
            pending.extend(producers[var].inputs)
    return False


def _input_of(program: Program, producers: dict[Var, Eqn], operand: Any) -> int | None:
    """The dynamic argument a matmul operand is a reshape of, if it is one."""
    while (
        isinstance(operand, Var) and operand in producers and producers[operand].primitive in _VIEWS
    ):
        operand = producers[operand].inputs[0]
    for position, var in enumerate(program.inputs):
        if var is operand and len(var.shape) == 4:
            return position
    return None


def _repeated_dim(shape: tuple[Dim, ...]) -> Dim:
    """The sequence length: the size that appears for both queries and keys in the logits."""
    repeated = [d for d in shape if not d.is_const and shape.count(d) >= 2]
    if not repeated:
        raise CannotPlan("not attention: the logits are not (queries, keys) of one sequence")
    return repeated[0]


def _seq_first(program: Program, positions: list[int], seq: Dim) -> bool:
    layouts = {
        program.inputs[p].shape.index(seq) if seq in program.inputs[p].shape else None
        for p in positions
    }
    if layouts == {2}:
        return False
    if layouts == {1}:
        return True
    raise CannotPlan(
        "attention inputs that are not (batch, heads, seq, dim) or (batch, seq, heads, dim) alike"
    )


def _bias(
    program: Program, chain: list[Eqn], producers: dict[Var, Eqn], operands: set[int]
) -> int | None:
    """The one input added to the logits (through broadcasts and casts), if any; every other
    input the program reads must be one of the matmul operands."""
    added = {
        _traced_back(i, producers) for eqn in chain if eqn.primitive == "add" for i in eqn.inputs
    }
    used = {i for eqn in program.eqns for i in eqn.inputs}
    extra = {p for p, var in enumerate(program.inputs) if p not in operands and var in used}
    if len(extra) > 1 or any(program.inputs[p] not in added for p in extra):
        raise CannotPlan(
            "attention that reads inputs besides queries, keys, values and one additive bias"
        )
    return extra.pop() if extra else None


def _traced_back(operand: Any, producers: dict[Var, Eqn]) -> Any:
    """What a broadcast, reshape or cast was made from."""
    while (
        isinstance(operand, Var)
        and operand in producers
        and producers[operand].primitive in ("broadcast_in_dim", "convert_element_type", *_VIEWS)
    ):
        operand = producers[operand].inputs[0]
    return operand


def _uses_iota(program: Program) -> bool:
    return any(eqn.primitive == "iota" for eqn in program.eqns)


def _mask_value(chain: list[Eqn], producers: dict[Var, Eqn]) -> float:
    for eqn in chain:
        if eqn.primitive == "select_n":
            for operand in eqn.inputs[1:]:
                value = _literal_behind(operand, producers)
                if value is not None and value < _MASK_THRESHOLD:
                    return value
    return -1e30


def _literal_behind(operand: Any, producers: dict[Var, Eqn]) -> float | None:
    """The scalar a broadcast or cast of a constant carries."""
    operand = _traced_back(operand, producers)
    if isinstance(operand, Literal) and not isinstance(operand.bench, bool):
        return float(operand.bench)
    return None


def _same_dims(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> bool:
    """Equal up to the order of the axes (the logits may be transposed before the scale)."""
    return sorted(map(repr, a)) == sorted(map(repr, b))


def _scale(
    chain: list[Eqn], logits: Var, head_dim: tuple[Fraction, Fraction]
) -> tuple[float | None, bool]:
    """The product of constant factors applied to the logits before the softmax, and whether it
    is 1/sqrt(head_dim) (then the factor is 1.0; the kernel rounds the scale as the reference's
    logits are rounded). A constant equal to 1/sqrt(head_dim) in both traces is read as following
    it, also when the traces share the head dimension: that is what attention's scale means, and a
    configuration with another head dimension (the tester's edge cases) needs its own."""
    traces: list[float] | None = None
    closeness = 1e-6
    for eqn in chain:
        if eqn.primitive == "reduce_max":
            break
        if eqn.primitive in ("mul", "div") and _same_dims(eqn.outputs[0].shape, logits.shape):
            constants = [i for i in eqn.inputs if isinstance(i, Literal)]
            if len(constants) == 1:
                values = [float(constants[0].bench), float(constants[0].check)]
                if eqn.primitive == "div":
                    values = [1.0 / v for v in values]
                traces = values if traces is None else [a * b for a, b in zip(traces, values)]
                closeness = max(closeness, float(jnp.finfo(constants[0].dtype).eps))
    if traces is None:
        return None, False
    if all(
        math.isclose(value, float(dim) ** -0.5, rel_tol=closeness)
        for value, dim in zip(traces, head_dim)
    ):
        return 1.0, True
    if traces[0] != traces[1]:
        raise CannotPlan("attention whose scale depends on the shapes other than 1/sqrt(head dim)")
    return traces[0], False
