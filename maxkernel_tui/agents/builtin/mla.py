"""Recognising multi-head latent attention (MLA) in the reference's program by its dataflow.

Two matmuls with a softmax between them are the attention core (attention.py reads its scale,
mask and rounding); every other matmul must be a projection, an activation times a 2-D weight
input. Their roles follow from where values flow, never from names: the projection after the
core is the output projection; the value operand is the latest projection upstream of the
core's second matmul (v_up) and the one feeding it the latent (kv_down); the key operand is the
core operand that depends on kv_down, its latest other projection k_up; the query operand's
projections are q_up and, when there are two, q_down. x is the 3-D input kv_down reads. The
sizes are the weights' own (pieces/mla.py), the rotary frequency base from the program's `pow`
of a constant, the cos/sin tables' dtype from what the reference rounds `cos` to. The reading,
and whether RoPE rotates halves or interleaved pairs, is confirmed by running pieces/mla.py's
glue with plain jnp matmuls and attention against the reference at check shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.agents.builtin.attention import (
    AttentionSpec,
    attention_as_read,
    read_softmax_core,
)
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.pieces.mla import _mla_layer
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Program, Var
from maxkernel_tui.agents.builtin.reading import reproduces_reference
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.task import Task

_VIEWS = ("reshape", "squeeze", "expand_dims", "convert_element_type")
_SOFTMAX = {"exp", "reduce_max", "reduce_sum"}


@dataclass(frozen=True)
class MlaSpec:
    """Positions among the dynamic arguments, the per-head dims, RoPE and the attention core."""

    x: int
    q_down: int | None  # None: the query is one projection of x
    q_up: int
    kv_down: int
    k_up: int
    v_up: int
    o_proj: int
    theta: float  # RoPE's frequency base, at check shapes (where the reading is confirmed)
    theta_arg: str | None  # the static argument that carries it (None: a constant)
    table_dtype: np.dtype  # the dtype of the cos/sin tables
    interleaved: bool  # RoPE on (even, odd) pairs rather than halves
    attention_dtype: np.dtype  # of the attention's output, before the output projection
    core: AttentionSpec  # over arguments 0, 1, 2 laid out (batch, seq, heads, dim)

    @property
    def weights(self) -> tuple[int | None, ...]:
        """The positions in `_mla_layer`'s argument order."""
        return (self.x, self.q_down, self.q_up, self.kv_down, self.k_up, self.v_up, self.o_proj)


def recognise_mla(program: Program, task: Task) -> MlaSpec:
    """The MLA spec of the program, or CannotPlan saying what does not match."""
    dots = [eqn for eqn in program.eqns if eqn.primitive == "dot_general"]
    producers = {o: eqn for eqn in program.eqns for o in eqn.outputs}
    first, second = _attention_pair(program, dots, producers)
    core = read_softmax_core(program, first, second)
    if core is None:
        raise CannotPlan("not MLA: no softmax between the attention's matmuls")
    weight_of = {
        dot: _weight(program, dot, producers) for dot in dots if dot not in (first, second)
    }
    projections = list(weight_of)
    value = [o for o in second.inputs if not _upstream_of(o, {first}, producers)]
    after = [d for d in projections if _upstream_of(d.inputs[0], {second}, producers)]
    if len(value) != 1 or len(after) != 1:
        raise CannotPlan("not MLA: no single value operand and output projection")
    v_up = _latest(_projections_above(value[0], projections, producers), program)
    kv_down = _latest(_projections_above(v_up.inputs[0], projections, producers), program)
    sides = [_projections_above(o, projections, producers) for o in first.inputs]
    key_side = [s for s in sides if kv_down in s]
    if len(key_side) != 1:
        raise CannotPlan("not MLA: the keys and not the queries must come from the latent")
    k_up = _latest(key_side[0] - {kv_down}, program)
    query = next(s for s in sides if kv_down not in s)
    q_up = _latest(query, program)
    q_down = _latest(query - {q_up}, program) if len(query) == 2 else None
    roles = [q_down, q_up, kv_down, k_up, v_up, after[0]]
    if len(query) > 2 or {r for r in roles if r} != set(projections):
        raise CannotPlan("not MLA: matmuls besides the query, latent, key, value and output ones")
    x = _input_of(program, kv_down.inputs[0], producers)
    used = {p for p, var in enumerate(program.inputs) if any(var in e.inputs for e in program.eqns)}
    if x is None or used != {x, *(weight_of[r] for r in roles if r)}:
        raise CannotPlan("not MLA: the projections do not read x and their 2-D weights alone")
    base = MlaSpec(
        x,
        weight_of[q_down] if q_down else None,
        weight_of[q_up],
        weight_of[kv_down],
        weight_of[k_up],
        weight_of[v_up],
        weight_of[after[0]],
        *_theta(program, task),
        _table_dtype(program),
        False,
        second.outputs[0].dtype,
        core,
    )
    for candidate in (base, replace(base, interleaved=True)):
        reading = partial(mla_as_read, candidate)
        if len(program.outputs) == 1 and reproduces_reference(
            lambda *args, r=reading: r(list(args)), task
        ):
            return candidate
    raise CannotPlan(
        "looks like MLA, but no reading of its projections, RoPE and attention reproduces the "
        "reference at check shapes"
    )


def mla_as_read(spec: MlaSpec, args: list[jax.Array]) -> jax.Array:
    """The MLA layer as the spec reads it, in plain jnp (pieces/mla.py's glue)."""
    x, *weights = (None if p is None else args[p] for p in spec.weights)
    return _mla_layer(
        x,
        *weights,
        project=_jnp_project,
        attend=lambda q, k, v: attention_as_read(spec.core, [q, k, v]),
        theta=spec.theta,
        table_dtype=spec.table_dtype,
        interleaved=spec.interleaved,
    )


def _jnp_project(lhs: jax.Array, weight: jax.Array) -> jax.Array:
    """`lhs @ weight` as the reference computes it: f32 accumulation, the promoted dtype out."""
    product = jnp.dot(lhs, weight, preferred_element_type=jnp.float32)
    return product.astype(jnp.result_type(lhs, weight))


def _attention_pair(
    program: Program, dots: list[Eqn], producers: dict[Var, Eqn]
) -> tuple[Eqn, Eqn]:
    """The one pair of matmuls with a softmax on the path from the first to the second."""
    pairs = []
    for second in dots:
        for operand in second.inputs:
            chain = _path_primitives(operand, producers, dots)
            if chain is not None and chain[1] >= _SOFTMAX:
                pairs.append((chain[0], second))
    if len(pairs) != 1:
        raise CannotPlan(f"not MLA: {len(pairs)} softmax(es) between two matmuls, MLA has one")
    return pairs[0]


def _path_primitives(
    operand: Operand, producers: dict[Var, Eqn], dots: list[Eqn]
) -> tuple[Eqn, set[str]] | None:
    """The nearest matmul upstream of `operand` along its first-operand chain of non-matmul
    equations, and the primitives met on the way; None when an input is reached first."""
    seen: set[str] = set()
    pending = [operand]
    while pending:
        var = pending.pop()
        if not isinstance(var, Var) or var not in producers:
            continue
        eqn = producers[var]
        if eqn in dots:
            return eqn, seen
        seen.add(eqn.primitive)
        pending.extend(eqn.inputs)
    return None


def _upstream_of(operand: Operand, targets: set[Eqn], producers: dict[Var, Eqn]) -> bool:
    return bool(_eqns_above(operand, producers) & targets)


def _eqns_above(operand: Operand, producers: dict[Var, Eqn]) -> set[Eqn]:
    found: set[Eqn] = set()
    pending = [operand]
    while pending:
        var = pending.pop()
        if isinstance(var, Var) and var in producers and producers[var] not in found:
            found.add(producers[var])
            pending.extend(producers[var].inputs)
    return found


def _projections_above(
    operand: Operand, projections: list[Eqn], producers: dict[Var, Eqn]
) -> set[Eqn]:
    return _eqns_above(operand, producers) & set(projections)


def _latest(eqns: set[Eqn], program: Program) -> Eqn:
    if not eqns:
        raise CannotPlan("not MLA: an attention operand with no projection above it")
    return max(eqns, key=program.eqns.index)


def _weight(program: Program, dot: Eqn, producers: dict[Var, Eqn]) -> int:
    """The 2-D weight input a projection multiplies its activation by, contracting the
    activation's last axis with the weight's first."""
    lhs, rhs = dot.inputs
    position = _input_of(program, rhs, producers)
    contracting, batch = dot.params["dimension_numbers"]
    if (
        position is None
        or len(program.inputs[position].shape) != 2
        or not isinstance(lhs, Var)
        or tuple(contracting) != ((len(lhs.shape) - 1,), (0,))
        or batch != ((), ())
    ):
        raise CannotPlan("not MLA: a matmul besides the attention's that is not x @ a 2-D weight")
    return position


def _input_of(program: Program, operand: Operand, producers: dict[Var, Eqn]) -> int | None:
    """The dynamic argument `operand` is a view or cast of, if it is one."""
    while (
        isinstance(operand, Var) and operand in producers and producers[operand].primitive in _VIEWS
    ):
        operand = producers[operand].inputs[0]
    for position, var in enumerate(program.inputs):
        if var is operand:
            return position
    return None


def _theta(program: Program, task: Task) -> tuple[float, str | None]:
    """RoPE's base: the constant raised to the rotary dims' fractions, at check shapes, and the
    static argument with its values in both traces, if one has (a configuration may change it:
    the kernel then reads it from that argument)."""
    bases = {
        (float(eqn.inputs[0].bench), float(eqn.inputs[0].check))
        for eqn in program.eqns
        if eqn.primitive == "pow" and isinstance(eqn.inputs[0], Literal)
    }
    if len(bases) != 1:
        raise CannotPlan("not MLA: no single rotary frequency base (a constant's power)")
    bench, check = bases.pop()
    module = runtime.load_reference(task)
    second = CHECK if CHECK in task.configs else task.configs[0]
    statics = [runtime.input_specs(task, module, c)[1] for c in (task.configs[0], second)]
    names = program.arg_names[len(program.inputs) :]
    carriers = [
        name
        for name, b, c in zip(names, *statics)
        if isinstance(b, (int, float)) and (b, c) == (bench, check)
    ]
    if len(carriers) == 1:
        return check, carriers[0]
    if bench != check:
        raise CannotPlan("not MLA: a rotary base that changes with the shapes but no argument")
    return check, None


def _table_dtype(program: Program) -> np.dtype:
    """What the reference rounds its cos table to (f32 when it keeps it)."""
    cosines = {o for eqn in program.eqns if eqn.primitive == "cos" for o in eqn.outputs}
    for eqn in program.eqns:
        if eqn.primitive == "convert_element_type" and eqn.inputs[0] in cosines:
            return eqn.outputs[0].dtype
    return np.dtype(np.float32)
