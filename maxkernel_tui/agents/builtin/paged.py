"""Recognising paged attention in the reference's jaxpr: the keys and values of each sequence
gathered from a page cache by a table of page indices, then softmax(scale * Q K^T, masked to
the sequence's length) V.

The program planner (program.py) does not translate gathers, so this reader walks the bench
jaxpr itself, calls inlined. Every pair of matmuls with a softmax between them must read the
same inputs, found by where they flow (never by name or value): the keys come through a
`gather` from a 4-D float cache whose indices come from a 2-D integer input (the page table);
the values from a 4-D cache (the same one when keys and values are interleaved in it); the
query from a 3-D float input, picked by a 1-D integer input (each sequence's query row); the
lengths are the other 1-D integer input the mask between the matmuls reads. The output says
decode (a row per sequence) from ragged (a row per query token). The scale is the constant on
the logits. The reading is then confirmed by running the reference and a plain jnp reading of
the spec at check shapes: a kernel is written only for a reading that reproduces it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core

from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.program import argument_names
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.perf.primitive_names import CALL_BODIES
from maxkernel_tui.kernels.task import Task

_SOFTMAX = {"exp", "reduce_max", "reduce_sum"}
# How closely a reading must agree with the reference, as a share of its largest output: the
# reference rounds logits and weights to bf16 where the reading does not.
_AGREEMENT = 0.03
# Query rows per block (ragged) and key tokens per grid step to start the autotune from.
PAGED_START = Tunables(block_rows=64, block_cols=256)


@dataclass(frozen=True)
class PagedSpec:
    query: int  # positions among the dynamic arguments
    keys: int  # the page cache the keys are gathered from
    values: int | None  # the values' cache; None when interleaved with the keys in `keys`
    lengths: int  # each sequence's number of cached tokens
    table: int  # (sequences, pages per sequence) page indices
    # Decode: each sequence's query row (None: row s is sequence s's); ragged: where its rows
    # start.
    query_rows: int | None
    scale: float | None  # the constant on the logits, times head_dim ** -0.5 when per_dim
    scale_per_dim: bool
    arg_names: tuple[str, ...]  # every argument of computation(), dynamic first
    out_dtype: np.dtype
    # Ragged: a row per query token, sequence s's rows starting at query_rows[s], causal from
    # what it has cached; `live` the (1,) input counting the sequences in use (None: all).
    ragged: bool = False
    live: int | None = None

    @property
    def family(self) -> str:
        return "ragged paged attention" if self.ragged else "paged attention"


@dataclass(eq=False)
class _Value:
    """One value the flattened program computes."""

    aval: Any


@dataclass(frozen=True)
class _Eqn:
    primitive: str
    inputs: list[Any]  # jaxpr vars (or literals) of the flattened program
    outputs: list[Any]
    params: dict[str, Any]
    bind: Any  # the jax primitive, to fold arithmetic on constants


def recognise_paged_attention(task: Task, problem: CannotPlan) -> PagedSpec:
    """The paged-attention spec of the task's reference. CannotPlan: `problem` (the program
    planner's reason) when the reference is not paged attention at all, else what does not
    match."""
    try:
        return _recognised(task)
    except CannotPlan as paged_problem:
        raise (problem if str(paged_problem).startswith("not paged") else paged_problem) from None


def _recognised(task: Task) -> PagedSpec:
    module = runtime.load_reference(task)
    specs, static = runtime.input_specs(task, module, task.configs[0])
    closed = jax.make_jaxpr(lambda *dynamic: module.computation(*dynamic, *static))(*specs)
    eqns, inputs, outputs = _flattened(closed)
    position = {var: p for p, var in enumerate(inputs)}
    producers = {o: e for e in eqns for o in e.outputs}
    dots = [e for e in eqns if e.primitive == "dot_general"]
    if len(dots) < 2 or len(dots) % 2:
        raise CannotPlan(f"not paged attention: {len(dots)} matmul(s), not pairs")
    readings = set()
    for first, second in zip(dots[::2], dots[1::2]):
        readings.add(_pair_roles(first, second, eqns, producers, position, specs))
    if len(readings) != 1:
        raise CannotPlan("not paged attention: its attentions read different inputs")
    query, keys, values, table, rows, lengths = readings.pop()
    (output,) = outputs if len(outputs) == 1 else (None,)
    if output is None:
        raise CannotPlan("not paged attention: more than one output")
    rows_out, sequences = output.aval.shape[0], specs[table].shape[0]
    ragged = rows_out != sequences and tuple(output.aval.shape) == tuple(specs[query].shape)
    if rows_out != sequences and not ragged:
        raise CannotPlan("not paged attention: an output neither per sequence nor per query row")
    counted = _ancestors(output, producers, position) - {query, keys, values, table, rows, lengths}
    if ragged and rows is None:  # the starts steer the keys (each token finds its sequence)
        starts = [p for p in counted if specs[p].shape == (sequences + 1,)]
        rows = starts[0] if len(starts) == 1 else None
        counted -= {rows}
    if ragged and rows is None:
        raise CannotPlan("not paged attention: no query start offsets for its ragged rows")
    live = [p for p in counted if specs[p].shape == (1,)] if ragged else []
    scale = _logits_scale(dots[0], eqns)
    head_dim = specs[query].shape[-1]
    per_dim = scale is not None and math.isclose(scale, head_dim**-0.5, rel_tol=1e-2)
    spec = PagedSpec(
        query,
        keys,
        values,
        lengths,
        table,
        rows,
        1.0 if per_dim else scale,
        per_dim,
        tuple(argument_names(module.computation, len(specs) + len(static))),
        np.dtype(output.aval.dtype),
        ragged,
        live[0] if len(live) == 1 else None,
    )
    if not _reproduces_reference(spec, task):
        raise CannotPlan(
            "looks like paged attention, but no reading of its page table, lengths and scale "
            "reproduces the reference at check shapes"
        )
    return spec


def _flattened(closed: Any) -> tuple[list[_Eqn], list[Any], list[Any]]:
    """The program's equations with nested calls inlined (their inner variables renamed to the
    outer ones), its inputs and outputs."""
    eqns: list[_Eqn] = []

    def inline(jaxpr: Any, args: list[Any], consts: list[Any]) -> list[Any]:
        env: dict[Any, Any] = dict(zip(jaxpr.invars, args))
        # A scalar captured as a constant (a scale computed eagerly) reads as a literal.
        env.update(
            (var, core.Literal(np.asarray(value), var.aval))
            for var, value in zip(jaxpr.constvars, consts)
            if np.size(value) == 1
        )

        def read(var: Any) -> Any:
            return var if isinstance(var, core.Literal) else env.get(var, var)

        for eqn in jaxpr.eqns:
            inputs = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            if name in CALL_BODIES:
                body = eqn.params[CALL_BODIES[name]]
                closed = isinstance(body, core.ClosedJaxpr)
                inner, consts = (body.jaxpr, body.consts) if closed else (body, [])
                env.update(zip(eqn.outvars, inline(inner, inputs, list(consts))))
                continue
            # Fresh values: an inlined body (jit's cache) can be the same object at two calls.
            outputs = [_Value(v.aval) for v in eqn.outvars]
            env.update(zip(eqn.outvars, outputs))
            eqns.append(_Eqn(name, inputs, outputs, dict(eqn.params), eqn.primitive))
        return [read(v) for v in jaxpr.outvars]

    outputs = inline(closed.jaxpr, list(closed.jaxpr.invars), list(closed.consts))
    return eqns, list(closed.jaxpr.invars), outputs


def _ancestors(operand: Any, producers: dict[Any, _Eqn], position: dict[Any, int]) -> set[int]:
    """The dynamic inputs a value is computed from."""
    found, pending, seen = set(), [operand], set()
    while pending:
        var = pending.pop()
        if isinstance(var, core.Literal) or id(var) in seen:
            continue
        seen.add(id(var))
        if var in position:
            found.add(position[var])
        elif var in producers:
            pending.extend(producers[var].inputs)
    return found


def _pair_roles(
    first: _Eqn,
    second: _Eqn,
    eqns: list[_Eqn],
    producers: dict[Any, _Eqn],
    position: dict[Any, int],
    specs: tuple,
) -> tuple[int, int, int | None, int, int | None, int]:
    """(query, keys, values, table, query rows, lengths) of one attention, by dataflow."""
    chain = _between(first, second, eqns)
    if not {e.primitive for e in chain} >= _SOFTMAX:
        raise CannotPlan("not paged attention: no softmax between two matmuls")

    def kind(p: int, rank: int, integer: bool) -> bool:
        spec = specs[p]
        return len(spec.shape) == rank and jnp.issubdtype(spec.dtype, jnp.integer) == integer

    sides = [_ancestors(o, producers, position) for o in first.inputs]
    probabilities = {id(o) for e in chain for o in e.outputs}
    value_side = set().union(
        *(_ancestors(o, producers, position) for o in second.inputs if id(o) not in probabilities)
    )
    for key_side, query_side in (sides, sides[::-1]):
        caches = [p for p in key_side if kind(p, 4, False)]
        tables = [p for p in key_side if kind(p, 2, True)]
        queries = [p for p in query_side if kind(p, 3, False)]
        rows = [p for p in query_side if kind(p, 1, True)]
        if len(caches) == len(tables) == len(queries) == 1 and len(rows) <= 1:
            break
    else:
        raise CannotPlan(
            "not paged attention: the keys are not gathered from a page cache by a page table"
        )
    value_caches = [p for p in value_side if kind(p, 4, False)]
    if len(value_caches) != 1:
        raise CannotPlan("not paged attention: the values are not read from one page cache")
    masked = set().union(*(_ancestors(i, producers, position) for e in chain for i in e.inputs))
    sequences = specs[tables[0]].shape[0]  # a length per sequence (the starts: one more)
    lengths = [
        p for p in masked if kind(p, 1, True) and p not in rows and specs[p].shape[0] == sequences
    ]
    if len(lengths) != 1:
        raise CannotPlan("not paged attention: no sequence lengths mask the logits")
    values = None if value_caches[0] == caches[0] else value_caches[0]
    return queries[0], caches[0], values, tables[0], rows[0] if rows else None, lengths[0]


def _between(first: _Eqn, second: _Eqn, eqns: list[_Eqn]) -> list[_Eqn]:
    """Equations on the path from the first matmul's result to the second matmul."""
    reached = {id(first.outputs[0])}
    chain = []
    for eqn in eqns[eqns.index(first) + 1 : eqns.index(second)]:
        if any(id(i) in reached for i in eqn.inputs):
            chain.append(eqn)
            reached.update(id(o) for o in eqn.outputs)
    return chain


def _logits_scale(first: _Eqn, eqns: list[_Eqn]) -> float | None:
    """The product of the constant factors on the logits before the softmax's maximum."""
    producers = {id(o): e for e in eqns for o in e.outputs}
    reached, scale = {id(first.outputs[0])}, None
    for eqn in eqns[eqns.index(first) + 1 :]:
        if not any(id(i) in reached for i in eqn.inputs):
            continue
        if eqn.primitive == "reduce_max":
            break
        reached.update(id(o) for o in eqn.outputs)
        constants = [_constant(i, producers) for i in eqn.inputs]
        known = [c for c in constants if c is not None]
        if eqn.primitive in ("mul", "div") and len(known) == 1 and np.size(known[0]) == 1:
            value = float(known[0])
            value = 1.0 / value if eqn.primitive == "div" else value
            scale = value if scale is None else scale * value
    return scale


def _constant(operand: Any, producers: dict[int, _Eqn]) -> Any:
    """The value of a literal, or of arithmetic on literals alone (a scale computed in the
    reference, `1 / sqrt(dim)`); None for anything that depends on an input."""
    if isinstance(operand, core.Literal):
        return np.asarray(operand.val)
    eqn = producers.get(id(operand))
    if eqn is None or not eqn.inputs:
        return None
    values = [_constant(i, producers) for i in eqn.inputs]
    if any(v is None for v in values) or len(eqn.outputs) != 1:
        return None
    return np.asarray(eqn.bind.bind(*values, **eqn.params))


def paged_as_read(spec: PagedSpec, args: list[jax.Array]) -> jax.Array:
    """Plain jnp paged attention as the spec reads it, in f32: decode, or ragged (each query
    row of a live sequence causal from its cached tokens, rows of no live sequence zero)."""
    q, cache, lengths, table = (args[i] for i in (spec.query, spec.keys, spec.lengths, spec.table))
    if spec.values is None:
        keys, values = cache[:, :, 0::2], cache[:, :, 1::2]
    else:
        keys, values = cache, args[spec.values]
    sequences, pages_per_seq = table.shape
    _, page_size, kv_heads, head_dim = keys.shape
    starts = jnp.arange(sequences) if spec.query_rows is None else args[spec.query_rows]
    group = q.shape[1] // kv_heads
    tokens = pages_per_seq * page_size
    scale = 1.0 if spec.scale is None else spec.scale
    scale = scale * head_dim**-0.5 if spec.scale_per_dim else scale

    def gathered(cache: jax.Array, seq: jax.Array) -> jax.Array:
        per_seq = cache[table[seq]].reshape(tokens, kv_heads, head_dim)
        return jnp.repeat(per_seq, group, axis=1).astype(jnp.float32)

    def attend(seq: jax.Array, rows: jax.Array, visible: jax.Array) -> jax.Array:
        logits = jnp.einsum("rhd,thd->rht", q[rows].astype(jnp.float32), gathered(keys, seq))
        logits = jnp.where(visible[:, None, :], logits * scale, -jnp.inf)
        probs = jax.nn.softmax(logits, axis=-1)
        return jnp.einsum("rht,thd->rhd", jnp.nan_to_num(probs), gathered(values, seq))

    key = jnp.arange(tokens)
    if not spec.ragged:
        return jax.vmap(lambda s: attend(s, starts[s][None], (key < lengths[s])[None])[0])(
            jnp.arange(sequences)
        )
    live = args[spec.live][0] if spec.live is not None else sequences
    row = jnp.arange(q.shape[0])

    def add_sequence(out: jax.Array, seq: jax.Array) -> tuple[jax.Array, None]:
        q_len = starts[seq + 1] - starts[seq]
        position = lengths[seq] - q_len + row - starts[seq]
        visible = (key[None, :] <= position[:, None]) & (key[None, :] < lengths[seq])
        mine = (row >= starts[seq]) & (row < starts[seq + 1]) & (seq < live)
        return out + jnp.where(mine[:, None, None], attend(seq, row, visible), 0.0), None

    zero = jnp.zeros(q.shape, jnp.float32)
    return jax.lax.scan(add_sequence, zero, jnp.arange(sequences))[0]


def _reproduces_reference(spec: PagedSpec, task: Task) -> bool:
    config = CHECK if CHECK in task.configs else task.configs[0]
    module = runtime.load_reference(task)
    dynamic, static = runtime.make_inputs(task, module, config, seed=0)
    expected = runtime.jitted_reference(module, len(dynamic), len(static))(*dynamic, *static)
    try:
        got = jax.jit(lambda *args: paged_as_read(spec, list(args)))(*dynamic)
    except (ValueError, TypeError, IndexError):
        return False
    if not isinstance(expected, jax.Array) or got.shape != expected.shape:
        return False
    # Relative to the output's own size: attention over small values has small outputs, and
    # a task's absolute tolerance alone would let a wrong reading through.
    expected = expected.astype(jnp.float32)
    tolerance = _AGREEMENT * float(jnp.max(jnp.abs(expected)))
    return bool(jnp.allclose(got, expected, atol=tolerance, rtol=_AGREEMENT))
