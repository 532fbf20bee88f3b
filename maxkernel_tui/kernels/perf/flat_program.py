"""A program with its calls inlined into one list of steps, and the scalar operands its
pallas_calls get (dynamic grid bounds, scalar-prefetch arrays) computed from concrete inputs
by only the XLA steps they need. The performance model counts a scalar-prefetch kernel's block
fetches and grid from them (a block is fetched again only when its index changes), and the
production tiles plan their samples with them. Imports jax.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jax.extend import core

from maxkernel_tui.kernels.perf.jaxpr_walk import sub_jaxprs, walk
from maxkernel_tui.kernels.perf.primitive_names import CALL_BODIES

# A variable of the flattened program: (the call it sits in, the variable)
Key = tuple[int, Any]

# The calls (of CALL_BODIES) inlined when they hold a kernel; a kernel inside any other (a
# loop, a branch, a custom derivative) cannot be flattened
KERNEL_CALLS = ("pjit", "jit", "closed_call", "core_call")


class NotFlat(Exception):
    """A program this module cannot flatten, or a kernel's scalar operands it cannot compute."""


@dataclass(frozen=True)
class Step:
    eqn: Any
    ins: tuple[Any, ...]  # Key or core.Literal
    outs: tuple[Key, ...]


@dataclass(frozen=True)
class FlatProgram:
    steps: list[Step]
    inputs: list[Key]
    consts: dict[Key, Any]
    outputs: list[Any]  # Key or core.Literal

    def kernels(self) -> list[Step]:
        return [s for s in self.steps if s.eqn.primitive.name == "pallas_call"]


@dataclass(frozen=True)
class ScalarOperands:
    """What one pallas_call's grid and index maps read besides the grid ids."""

    grid_bounds: list[int]  # the dynamic grid extents, in order
    index: list[np.ndarray]  # the scalar-prefetch operands


def key_of(atom: Any) -> Key | None:
    return None if isinstance(atom, core.Literal) else atom


def holds_kernel(eqn: Any) -> bool:
    return any(site.name == "pallas_call" for sub in sub_jaxprs(eqn.params) for site in walk(sub))


def flatten(closed_jaxpr: Any) -> FlatProgram:
    """The program with its calls inlined, each variable keyed by the call it sits in."""
    steps: list[Step] = []
    consts: dict[Key, Any] = {}
    frames = itertools.count()

    def inline(jaxpr: Any, const_values: Sequence[Any], args: list[Any]) -> list[Any]:
        frame = next(frames)
        env: dict[Any, Any] = {}

        def read(atom: Any) -> Any:
            return atom if isinstance(atom, core.Literal) else env[atom]

        for var, value in zip(jaxpr.constvars, const_values, strict=True):
            env[var] = (frame, var)
            consts[(frame, var)] = value
        env.update(zip(jaxpr.invars, args, strict=True))
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            holds = holds_kernel(eqn)
            if name in CALL_BODIES and (not holds or name in KERNEL_CALLS):
                inner = eqn.params[CALL_BODIES[name]]
                inner_consts = getattr(inner, "consts", ())
                outs = inline(getattr(inner, "jaxpr", inner), inner_consts, ins)
                env.update(zip(eqn.outvars, outs, strict=True))
                continue
            if holds:
                raise NotFlat(f"a pallas_call inside {name}")
            keys = tuple((frame, v) for v in eqn.outvars)
            env.update(zip(eqn.outvars, keys, strict=True))
            steps.append(Step(eqn, tuple(ins), keys))
        return [read(v) for v in jaxpr.outvars]

    top = closed_jaxpr.jaxpr
    inputs = [(-1, v) for v in top.invars]
    outputs = inline(top, closed_jaxpr.consts, list(inputs))
    return FlatProgram(steps, inputs, consts, outputs)


def _scalar_count(step: Step) -> int:
    mapping = step.eqn.params["grid_mapping"]
    return int(mapping.num_dynamic_grid_bounds) + int(mapping.num_index_operands)


def scalar_inputs(flat: FlatProgram) -> list[int]:
    """Positions of the program's inputs its kernels' scalar operands are computed from."""
    _, needed = _producing(flat)
    return [position for position, k in enumerate(flat.inputs) if k in needed]


def scalar_operands(flat: FlatProgram, inputs: Sequence[Any]) -> list[ScalarOperands]:
    """Each kernel's scalar operands (in the order of flat.kernels()), computed from `inputs`
    by the XLA before it: only the steps they need run, and only the inputs at scalar_inputs()
    are read (the others may be None). Ones another kernel computes raise NotFlat."""
    producing, _ = _producing(flat)
    env: dict[Any, Any] = dict(flat.consts)
    env.update(zip(flat.inputs, inputs, strict=True))
    for step in producing:
        args = [a.val if isinstance(a, core.Literal) else env[a] for a in step.ins]
        with step.eqn.ctx.manager:
            result = step.eqn.primitive.bind(
                *args, **step.eqn.primitive.get_bind_params(step.eqn.params)
            )
        env.update(
            zip(step.outs, result if step.eqn.primitive.multiple_results else [result], strict=True)
        )
    found = []
    for s in flat.kernels():
        values = [
            np.asarray(a.val if isinstance(a, core.Literal) else env[a])
            for a in s.ins[: _scalar_count(s)]
        ]
        bounds = int(s.eqn.params["grid_mapping"].num_dynamic_grid_bounds)
        found.append(ScalarOperands([int(v) for v in values[:bounds]], values[bounds:]))
    return found


def _producing(flat: FlatProgram) -> tuple[list[Step], set[Any]]:
    """The steps the kernels' scalar operands need, in program order, and every value they
    read."""
    needed: set[Any] = {key_of(a) for s in flat.kernels() for a in s.ins[: _scalar_count(s)]}
    needed.discard(None)
    producing = []
    for step in reversed(flat.steps):
        if needed.intersection(step.outs):
            if step.eqn.primitive.name == "pallas_call":
                raise NotFlat("scalar-prefetch operands computed by another kernel")
            producing.append(step)
            needed.update(k for k in map(key_of, step.ins) if k is not None)
    return producing[::-1], needed


def has_scalar_operands(flat: FlatProgram) -> bool:
    return any(_scalar_count(s) for s in flat.kernels())
