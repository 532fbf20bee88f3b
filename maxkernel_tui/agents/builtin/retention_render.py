"""A decayed-scan spec -> its kernel file: pieces/retention.py's kernel and wrapper copied as
written, the reference's own row statistic, divisor and decay prologue written back as jnp
(the prologue runs before the kernel: O(batch * heads * seq) work beside the kernel's
O(seq^2)), the chunk lengths as the file's tunables. Imports nothing heavy.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.dims import Dim, ShapeLiteral
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.primitives import ELEMENTWISE, dtype_source
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Program, Var
from maxkernel_tui.agents.builtin.retention import Chain, DecayKind, RetentionSpec
from maxkernel_tui.agents.builtin.tunables import Tunables


def render_retention(
    spec: RetentionSpec, program: Program, carried_state: bool, tunables: Tunables
) -> str:
    """`carried_state`: one pass over the chunks with the state carried (spec.carries_state),
    else every chunk pair of the quadratic form."""
    names = {
        symbol: f"{program.arg_names[position]}.shape[{axis}]"
        for symbol, (position, axis) in program.dims.origins.items()
    }
    tables = _Tables(program, names)
    prologue = _Emitter(program, names, tables, kernel=False)
    prologue_lines = prologue.lines_for(spec.prologue)
    vector = prologue.name(spec.vector)  # before the tables are written: it may be one
    sections = [
        _docstring(spec, carried_state)
        + "\n"
        + parts.imports("functools")
        + "import numpy as np\n",
        _constants(tunables, carried_state)
        + "\n"
        + parts.VMEM_CONSTANTS
        + "\n"
        + parts.RETENTION_CONSTANTS,
        *tables.definitions(),
        *parts.functions_source(parts.STATE_SCAN if carried_state else parts.RETENTION),
        *(
            ()
            if carried_state
            else (_row_function("_row_term", "scores", spec.row_term, program, names),)
        ),
        _row_function("_divisor", "total", spec.divisor, program, names),
        _computation(spec, program, prologue_lines, vector, carried_state),
    ]
    return "\n\n".join(section.rstrip("\n") + "\n" for section in sections)


def _docstring(spec: RetentionSpec, carried_state: bool) -> str:
    decay = (
        "exp(rate_h * (i - j)) with a log-rate per head"
        if spec.decay is DecayKind.HEAD_RATE
        else "exp(c_i - c_j) with a cumulative log-decay per position"
    )
    form = (
        "Chunks in sequence order: grid (batch, head, chunk), chunks 'arbitrary'; per chunk "
        "two matmuls with the decay mask between them for its own keys, and the earlier keys "
        "through a state carried in f32 VMEM scratch (S = sum exp(c_end - c_j) k_j v_j^T and "
        "z = sum exp(c_end - c_j) k_j, zeroed at the first chunk, moved to each chunk's end)."
        if carried_state
        else "Sequence chunks: grid (batch, head, query chunk, key chunk), key chunks innermost "
        "and 'arbitrary'; per chunk pair two matmuls with the decay mask between them; the "
        "weighted values and the row statistic carried in f32 VMEM scratch from one key chunk "
        "to the next (zeroed at the first, divided at the last); chunks after the query chunk "
        "neither computed nor fetched."
        + (
            " The row statistic can cancel, so the key chunks run twice: first its sum, then the "
            "weights divided before they are rounded, as the reference rounds them."
            if spec.statistic_cancels
            else ""
        )
    )
    plan = (
        f"Plan: the decayed causal scan (Q K^T) * D, D = {decay}, each row divided by what the "
        f"reference makes of its sum over keys, then times V. {form} The decay vector is "
        "computed before the kernel, as the reference computes it."
    )
    return parts.kernel_docstring("Decayed-scan", plan)


def _constants(tunables: Tunables, carried_state: bool) -> str:
    if carried_state:
        return (
            "# Tunables: the preferred chunk length (shrunk to a divisor of the sequence).\n"
            f"BLOCK_Q = {tunables.block_rows}\n"
        )
    return (
        "# Tunables: preferred query and key chunk lengths (shrunk to divisors of the sequence).\n"
        f"BLOCK_Q = {tunables.block_rows}\n"
        f"BLOCK_KV = {tunables.block_cols}\n"
    )


class _Tables:
    """Arrays the reference captures, as module-level tables at the larger of their two traced
    shapes, sliced in the file to the sizes they take (the smaller trace's values must be the
    larger's leading part: a function of the position along each axis). Shapes beyond the
    table's are refused by the slice's shape, never silently wrong."""

    def __init__(self, program: Program, names: dict[str, str]) -> None:
        self.program = program
        self.names = names
        self.used: dict[Var, str] = {}

    def expression(self, var: Var) -> str:
        if var not in self.used:
            short, long = sorted(self.program.constants[var], key=lambda values: values.size)
            if not all(s <= n for s, n in zip(short.shape, long.shape)) or (
                long[tuple(slice(0, n) for n in short.shape)].tolist() != short.tolist()
            ):
                raise CannotPlan(
                    "a captured constant array whose values at one traced shape do not lead "
                    "its values at the other"
                )
            self.used[var] = f"CONSTANT_{len(self.used)}"
        slices = ", ".join(f":{dim.render(self.names)}" for dim in var.shape)
        return f"{self.used[var]}[{slices}]"

    def definitions(self) -> list[str]:
        lines = []
        for var, name in self.used.items():
            values = max(self.program.constants[var], key=lambda values: values.size)
            items = textwrap.wrap(repr(values.tolist()), 92, break_on_hyphens=False)
            lines.append(
                "# A constant array of the reference, at the larger of its traced shapes.\n"
                f"{name} = np.asarray(\n"
                + "".join(f"    {item}\n" for item in items[:-1])
                + f"    {items[-1]},\n    np.{values.dtype.name},\n)\n"
            )
        return lines


class _Emitter:
    """Equations as jnp assignments. In a kernel (`kernel`) values are (rows, 1) blocks, so a
    view is the value itself; before it, views are written with the shapes they take."""

    def __init__(
        self, program: Program, names: dict[str, str], tables: _Tables | None, *, kernel: bool
    ) -> None:
        self.program = program
        self.names = names
        self.tables = tables
        self.kernel = kernel
        self.values: dict[Var, str] = {
            var: name for name, var in zip(program.arg_names, program.inputs)
        }

    def name(self, operand: Operand) -> str:
        if isinstance(operand, Literal):
            return self._literal(operand)
        if operand not in self.values:
            if self.tables is None or operand not in self.program.constants:
                raise CannotPlan("a decayed scan whose row divisor reads another value")
            self.values[operand] = self.tables.expression(operand)
        return self.values[operand]

    def lines_for(self, eqns: tuple[Eqn, ...]) -> list[str]:
        """Each equation as an assignment (views inside a kernel as none)."""
        lines: list[str] = []
        for eqn in eqns:
            expression = self._expression(eqn)
            if expression is None:  # a view inside the kernel: the value itself
                self.values[eqn.outputs[0]] = self.name(eqn.inputs[0])
                continue
            target = f"t{len(lines)}"
            lines.append(f"{target} = {expression}")
            self.values[eqn.outputs[0]] = target
        return lines

    def _expression(self, eqn: Eqn) -> str | None:
        args = [self.name(operand) for operand in eqn.inputs]
        if eqn.primitive in ELEMENTWISE:
            return ELEMENTWISE[eqn.primitive](args, eqn.params)
        if self.kernel:
            return None
        shape = self._shape(eqn.outputs[0].shape)
        if eqn.primitive == "cumsum":
            return (
                f"jax.lax.cumsum({args[0]}, axis={eqn.params['axis']}, "
                f"reverse={eqn.params['reverse']})"
            )
        if eqn.primitive == "iota":
            return (
                f"jax.lax.broadcasted_iota({dtype_source(eqn.params['dtype'])}, {shape}, "
                f"{eqn.params['dimension']})"
            )
        if eqn.primitive == "broadcast_in_dim":
            dims = tuple(eqn.params["broadcast_dimensions"])
            return f"jax.lax.broadcast_in_dim({args[0]}, {shape}, {dims})"
        return f"jnp.reshape({args[0]}, {shape})"

    def _shape(self, dims: tuple[Dim, ...]) -> str:
        rendered = [dim.render(self.names) for dim in dims]
        return f"({rendered[0]},)" if len(rendered) == 1 else f"({', '.join(rendered)})"

    def _literal(self, literal: Literal) -> str:
        value = literal.value(self.program.dims)
        if isinstance(value, ShapeLiteral):
            return value.render(self.names)
        if isinstance(value, bool) or np.issubdtype(literal.dtype, np.integer):
            return str(value if isinstance(value, bool) else int(value))
        value = float(value)
        if math.isnan(value):
            return "jnp.nan"
        if math.isinf(value):
            return "jnp.inf" if value > 0 else "-jnp.inf"
        return repr(value)


def _row_function(
    function: str, argument: str, chain: Chain, program: Program, names: dict[str, str]
) -> str:
    """The reference's equations from `chain.start` to `chain.end`, on a (rows, ...) block."""
    emitter = _Emitter(program, names, None, kernel=True)
    emitter.values[chain.start] = argument
    lines = emitter.lines_for(chain.eqns)
    result = emitter.name(chain.end)
    body = "".join(f"    {line}\n" for line in lines)
    return (
        f"def {function}({argument}):\n"
        f'    """The reference\'s own equations, on blocks of rows."""\n'
        f"{body}    return {result}\n"
    )


def _computation(
    spec: RetentionSpec, program: Program, prologue: list[str], vector: str, carried_state: bool
) -> str:
    """computation(): the decay vector as the reference computes it, then the scan kernel."""
    names = program.arg_names
    decay = "rate" if spec.decay is DecayKind.HEAD_RATE else "cumulative"
    arguments = [
        names[spec.query],
        names[spec.key],
        names[spec.value],
        vector if carried_state else f"{decay}={vector}",
        f"out_dtype={dtype_source(spec.out_dtype)}",
        *(() if carried_state else ("row_term=_row_term",)),
        "divisor=_divisor",
        f"weights_dtype={dtype_source(spec.weights_dtype)}",
        *(("two_pass=True",) if spec.statistic_cancels and not carried_state else ()),
    ]
    call = f"    return {'_state_scan' if carried_state else '_retention'}("
    lines = textwrap.wrap(
        ", ".join(arguments), 100 - len(call), break_long_words=False, break_on_hyphens=False
    )
    body = "".join(f"    {line}\n" for line in prologue)
    return (
        f"def computation({', '.join(names)}):\n"
        + "    # The decay vector, as the reference computes it (before the kernel).\n"
        + body
        + call
        + f"\n{' ' * len(call)}".join(lines)
        + ")\n"
    )
