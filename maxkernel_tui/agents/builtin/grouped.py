"""Recognising grouped matmuls in the reference's program: a grouped matmul over consecutive row
groups (megablox), and a top-k routed mixture of gated-SiLU experts (its experts' matmuls are
grouped matmuls once the tokens are sorted by expert).

Both are read from the program's structure, traced leniently (their references use top_k,
cumsum, gathers and scatters, which the stage planner does not translate):
- grouped matmul: a 1-D integer input whose prefix sum (cumsum) places the groups, a 3-D input
  (groups, depth, cols) contracted on its depth axis by a matmul (batched over its groups, or
  dense over every group), and a 2-D input (rows, depth); the result is (rows, cols).
- routed MoE: a top_k over logits made by a matmul of the tokens with a 2-D router (hidden,
  experts); three 3-D inputs with the experts' count first, two contracted with the tokens (the
  gate and the up projection) and one with their gated product (the down projection); a SiLU
  (logistic) between them.
Each reading (which input plays which part, gate or up) is then confirmed by running a plain jnp
version of it beside the reference at check shapes (reading.py): the agent writes a kernel only
for a reading that reproduces the reference.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import Enum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.pieces.grouped import _first_accumulator
from maxkernel_tui.agents.builtin.pieces.moe import _routed_moe
from maxkernel_tui.agents.builtin.program import Eqn, Program, Var
from maxkernel_tui.agents.builtin.reading import reproduces_reference
from maxkernel_tui.kernels.task import Task

# What a value is made from without changing its data: traced through to find inputs.
_PASSING = ("reshape", "squeeze", "expand_dims", "convert_element_type", "broadcast_in_dim")

# What a window of rows is cut from: its first operand.
_WINDOWS = ("pad", "gather", "dynamic_slice", "slice")


class GroupedFamily(Enum):
    GROUPED_MATMUL = "grouped matmul over row groups (scalar-prefetched group tiles)"
    ROUTED_MOE = "top-k routed MoE: grouped matmuls over tokens sorted by expert"


@dataclass(frozen=True)
class GroupedMatmulSpec:
    lhs: int  # positions among the dynamic arguments
    weights: int
    group_sizes: int
    out_dtype: np.dtype

    family = GroupedFamily.GROUPED_MATMUL


@dataclass(frozen=True)
class RoutedMoeSpec:
    tokens: int  # positions among the dynamic arguments
    router: int
    gate: int
    up: int
    down: int
    top_k: int
    out_dtype: np.dtype

    family = GroupedFamily.ROUTED_MOE


GroupedSpec = GroupedMatmulSpec | RoutedMoeSpec


def recognise_grouped(program: Program, task: Task) -> GroupedSpec:
    """The grouped spec of the program, or CannotPlan saying what does not match."""
    if len(program.outputs) != 1 or not isinstance(program.outputs[0], Var):
        raise CannotPlan("not a grouped matmul: the reference returns more than one array")
    if any(eqn.primitive == "top_k" for eqn in program.eqns):
        return _routed_moe_spec(program, task)
    return _grouped_matmul_spec(program, task)


def _ragged_grouped_matmul(
    lhs: jax.Array,
    weights: tuple[jax.Array, ...],
    group_sizes: jax.Array,
    *,
    out_dtype: Any,
    epilogue: Any = _first_accumulator,
    operands: str | None = None,
) -> jax.Array:
    """pieces/grouped.py's `_grouped_matmul` in plain jnp (lax.ragged_dot), for the readings."""
    products = [
        jax.lax.ragged_dot(
            lhs, w, group_sizes.astype(jnp.int32), preferred_element_type=jnp.float32
        )
        for w in weights
    ]
    return epilogue(*products).astype(out_dtype)


def _grouped_matmul_spec(program: Program, task: Task) -> GroupedMatmulSpec:
    producers = _producers(program)
    placed = {
        _input_position(program, producers, eqn.inputs[0])
        for eqn in program.eqns
        if eqn.primitive == "cumsum"
    }
    sizes = [
        p
        for p in placed
        if p is not None
        and len(program.inputs[p].shape) == 1
        and np.issubdtype(program.inputs[p].dtype, np.integer)
    ]
    if len(sizes) != 1:
        raise CannotPlan("not a grouped matmul: no integer group sizes placed by a prefix sum")
    groups = program.inputs[sizes[0]].shape[0]
    out = program.outputs[0]
    assert isinstance(out, Var)
    for dot in (eqn for eqn in program.eqns if eqn.primitive == "dot_general"):
        (_, rhs_contract), (_, rhs_batch) = dot.params["dimension_numbers"]
        weights = _input_position(program, producers, dot.inputs[1])
        # Batched over the groups (each window times its weight), or every group's weight on
        # every row (a dense reference that masks the rows afterwards).
        if weights is None or tuple(rhs_batch) not in ((0,), ()) or tuple(rhs_contract) != (1,):
            continue
        w_shape = program.inputs[weights].shape
        # The rows reach the matmul through the reference's windows (pads, gathers, slices).
        lhs = _input_position(program, producers, dot.inputs[0], _PASSING + _WINDOWS)
        if (
            len(w_shape) == 3
            and w_shape[0] == groups
            and out.shape[1:] == w_shape[2:]
            and lhs is not None
            and len(program.inputs[lhs].shape) == 2
            and program.inputs[lhs].shape[0] == out.shape[0]
        ):
            spec = GroupedMatmulSpec(lhs, weights, sizes[0], out.dtype)
            if reproduces_reference(lambda *args, s=spec: _grouped_as_read(s, args), task):
                return spec
            raise CannotPlan(
                "looks like a grouped matmul, but the plain grouped matmul of its inputs does "
                "not reproduce the reference at check shapes"
            )
    raise CannotPlan("not a grouped matmul: no matmul batched over the groups of a 3-D weight")


def _grouped_as_read(spec: GroupedMatmulSpec, args: tuple[jax.Array, ...]) -> jax.Array:
    lhs, weights, sizes = args[spec.lhs], args[spec.weights], args[spec.group_sizes]
    return _ragged_grouped_matmul(lhs, (weights,), sizes, out_dtype=spec.out_dtype)


def _routed_moe_spec(program: Program, task: Task) -> RoutedMoeSpec:
    producers = _producers(program)
    top = next(eqn for eqn in program.eqns if eqn.primitive == "top_k")
    router_dot = _producing_dot(top.inputs[0], producers)
    if router_dot is None:
        raise CannotPlan("not a routed MoE: the top-k is not over a matmul's logits")
    read = [_input_position(program, producers, operand) for operand in router_dot.inputs]
    if None in read or not any(eqn.primitive == "logistic" for eqn in program.eqns):
        raise CannotPlan("not a routed MoE of gated-SiLU experts")
    # The router is (hidden, experts): its last size is the logits' (the second operand first,
    # as tokens times router is written, when both match).
    logits = top.inputs[0]
    assert isinstance(logits, Var)
    routers = [
        p
        for p in read[::-1]
        if p is not None
        and len(program.inputs[p].shape) == 2
        and program.inputs[p].bench_shape[-1] == logits.bench_shape[-1]
    ]
    if not routers:
        raise CannotPlan("not a routed MoE: no (hidden, experts) router")
    router = routers[0]
    tokens = next(p for p in read if p is not None and p != router)
    experts = program.inputs[router].bench_shape[1]
    first_layer: list[int] = []
    second_layer: list[int] = []
    for dot in (eqn for eqn in program.eqns if eqn.primitive == "dot_general"):
        positions = [_input_position(program, producers, operand) for operand in dot.inputs]
        # The experts' count is not tied by dataflow to the router's (a one-hot's size is a
        # constant): the bench sizes say it, and the reading's check confirms it.
        weight = [
            p
            for p in positions
            if p is not None
            and len(program.inputs[p].shape) == 3
            and program.inputs[p].bench_shape[0] == experts
        ]
        if len(weight) == 1:
            (first_layer if tokens in positions else second_layer).append(weight[0])
    if len(first_layer) != 2 or len(second_layer) != 1:
        raise CannotPlan("not a routed MoE: no gate, up and down projections over the experts")
    for gate, up in itertools.permutations(first_layer):
        spec = RoutedMoeSpec(
            tokens,
            router,
            gate,
            up,
            second_layer[0],
            int(top.params["k"]),
            program.outputs[0].dtype,
        )
        if reproduces_reference(lambda *args, s=spec: _moe_as_read(s, args), task):
            return spec
    raise CannotPlan(
        "looks like a routed MoE, but no reading of its gate and up projections reproduces the "
        "reference at check shapes"
    )


def _moe_as_read(spec: RoutedMoeSpec, args: tuple[jax.Array, ...]) -> jax.Array:
    roles = (spec.tokens, spec.router, spec.gate, spec.up, spec.down)
    tokens, router, gate, up, down = (args[p] for p in roles)
    return _routed_moe(
        tokens,
        router,
        gate,
        up,
        down,
        spec.top_k,
        grouped_matmul=_ragged_grouped_matmul,
        out_dtype=spec.out_dtype,
    )


def _producers(program: Program) -> dict[Var, Eqn]:
    return {o: eqn for eqn in program.eqns for o in eqn.outputs}


def _input_position(
    program: Program, producers: dict[Var, Eqn], operand: Any, through: tuple[str, ...] = _PASSING
) -> int | None:
    """The dynamic argument an operand is made from by `through` (by default views, casts and
    broadcasts), if one."""
    while (
        isinstance(operand, Var)
        and operand in producers
        and producers[operand].primitive in through
    ):
        operand = producers[operand].inputs[0]
    return next((p for p, var in enumerate(program.inputs) if var is operand), None)


def _producing_dot(operand: Any, producers: dict[Var, Eqn]) -> Eqn | None:
    """The matmul a value is made from by views and casts, if one."""
    while isinstance(operand, Var) and operand in producers:
        eqn = producers[operand]
        if eqn.primitive == "dot_general":
            return eqn
        if eqn.primitive not in _PASSING:
            return None
        operand = eqn.inputs[0]
    return None
