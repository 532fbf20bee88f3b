"""Gradients judged like outputs: the backward program of a computation, and the cotangents it is
fed. Imports jax; used by the tracer (the candidate's backward), the judge (its checks and runs)
and the reference worker (the reference's gradients), so that all three agree on what a
backward program is and on the cotangents of a seed.

A backward program is a function of the task's dynamic inputs and one cotangent per output
(flattened, in that order) that returns the gradient of each requested parameter of
`computation` (Task.gradients, in that order): `jax.vjp` of the computation with respect to
those parameters, applied to the cotangents. A candidate's is traced from its own
`computation`, so a `jax.custom_vjp` brings its backward (Pallas kernels) into the program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from maxkernel_tui.kernels.loader import computation_parameters, parse_python
from maxkernel_tui.kernels.task import Task, TaskError

# Mixed into a run's seed so that its cotangents are not drawn like its inputs.
_COTANGENT_SALT = 0x6A7D


def positions(task: Task, n_dynamic: int) -> tuple[int, ...]:
    """The positions among computation's arguments of the parameters whose gradients are asked
    for; TaskError where one is a static argument (nothing to differentiate)."""
    parameters = computation_parameters(parse_python(task.reference_path), task.entry_points)
    found = []
    for name in task.gradients:
        if name not in parameters:
            raise TaskError(
                task.reference_path, f"gradients of {name!r}: not a parameter of computation"
            )
        at = parameters.index(name)
        if at >= n_dynamic:
            raise TaskError(
                task.reference_path,
                f"gradients of {name!r}: a static argument of computation, not an array input",
            )
        found.append(at)
    return tuple(found)


def check_differentiable(
    task: Task, specs: Sequence[Any], at: tuple[int, ...], outputs: Sequence[Any]
) -> None:
    """Each requested parameter one floating-point array, every output floating-point (a
    cotangent of its type is drawn for each); TaskError naming what is not."""
    for name, position in zip(task.gradients, at, strict=True):
        spec = specs[position]
        if not isinstance(spec, jax.ShapeDtypeStruct) or not _floating(spec):
            raise TaskError(
                task.reference_path,
                f"gradients of {name!r}: it is {_kind(spec)}, not one floating-point array",
            )
    fixed = [_kind(o) for o in outputs if not _floating(o)]
    if fixed:
        raise TaskError(
            task.reference_path,
            f"gradients need floating-point outputs; computation also returns {', '.join(fixed)}",
        )


def cotangent_specs(outputs: Sequence[Any]) -> list[jax.ShapeDtypeStruct]:
    return [jax.ShapeDtypeStruct(tuple(o.shape), o.dtype) for o in outputs]


def cotangents(outputs: Sequence[Any], seed: int) -> list[jax.Array]:
    """One standard-normal cotangent per output leaf, of its shape and type, from `seed`: the
    same in every process that asks for the same seed (the candidate's judge and the
    reference's worker)."""
    keys = jax.random.split(jax.random.key(seed ^ _COTANGENT_SALT), max(len(outputs), 1))
    return [
        jax.random.normal(key, tuple(o.shape), jnp.float32).astype(o.dtype)
        for key, o in zip(keys, outputs)
    ]


def backward(
    computation: Callable[..., Any], static: tuple[Any, ...], at: tuple[int, ...]
) -> Callable[[tuple[Any, ...], list[Any]], list[Any]]:
    """The backward program of `computation` (module docstring) as a function of the dynamic
    inputs (a tuple) and the cotangents (flat, one per output leaf)."""

    def run(dynamic: tuple[Any, ...], cotangent: list[Any]) -> list[Any]:
        def of_chosen(*chosen: Any) -> Any:
            args = list(dynamic)
            for position, value in zip(at, chosen, strict=True):
                args[position] = value
            return computation(*args, *static)

        output, pullback = jax.vjp(of_chosen, *(dynamic[p] for p in at))
        return list(pullback(jax.tree.unflatten(jax.tree.structure(output), cotangent)))

    return run


def flat_backward(
    computation: Callable[..., Any],
    specs: tuple[Any, ...],
    static: tuple[Any, ...],
    at: tuple[int, ...],
    outputs: Sequence[Any],
) -> tuple[Callable[..., list[Any]], list[Any]]:
    """The backward program as a function of flat arguments (the dynamic inputs' leaves, then
    the cotangents), as a carried program takes them, and those arguments' specs."""
    leaves, tree = jax.tree.flatten(tuple(specs))
    count = len(leaves)
    program = backward(computation, static, at)

    def run(*flat: Any) -> list[Any]:
        return program(jax.tree.unflatten(tree, flat[:count]), list(flat[count:]))

    return run, [*leaves, *cotangent_specs(outputs)]


def trace_backward(
    computation: Callable[..., Any],
    specs: tuple[Any, ...],
    static: tuple[Any, ...],
    at: tuple[int, ...],
    outputs: Sequence[Any],
) -> Any:
    """The backward program's jaxpr at these shapes (a ClosedJaxpr; inputs: the dynamic leaves,
    then the cotangents)."""
    program = backward(computation, static, at)
    return jax.make_jaxpr(program)(tuple(specs), cotangent_specs(outputs))


def reference_gradients(
    computation: Callable[..., Any],
    dynamic: tuple[Any, ...],
    static: tuple[Any, ...],
    at: tuple[int, ...],
    seed: int,
) -> list[Any]:
    """The reference's gradients at these inputs and the seed's cotangents, matmuls at the
    highest precision (as its outputs)."""
    outputs = jax.tree.leaves(jax.eval_shape(lambda *d: computation(*d, *static), *dynamic))
    with jax.default_matmul_precision("highest"):
        program = jax.jit(backward(computation, static, at))
        return list(jax.block_until_ready(program(tuple(dynamic), cotangents(outputs, seed))))


def _floating(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and bool(jnp.issubdtype(dtype, jnp.floating))


def _kind(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{value.dtype}{list(value.shape)}"
    return f"a {type(value).__name__}"
