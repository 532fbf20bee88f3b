"""The reference as a flat program: its jaxpr traced at two configurations, walked in lockstep.

Nested calls (jit, custom_jvp/vjp) are inlined, scalar arithmetic on constants is folded, and
equations whose results are never used are dropped. Every size is a `Dim` (dims.py), every
scalar constant keeps both of its values, so later stages can tell sizes from constants.
Imports jax: this runs in the agent's worker process, never in the UI.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import jax
import numpy as np
from jax.extend import core

from maxkernel_tui.agents.builtin.dataflow import (
    Nodes,
    SizeFlow,
    flow_equation,
    flow_plain_conv,
    flow_transposed_conv,
)
from maxkernel_tui.agents.builtin.dims import Dim, DimTable, ShapeRuleError
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.primitives import (
    is_plain_conv,
    is_translatable,
    is_transposed_conv,
    uneven_phases,
)
from maxkernel_tui.kernels import reference_runtime as runtime
from maxkernel_tui.kernels.config_names import CHECK
from maxkernel_tui.kernels.perf.primitive_names import CALL_BODIES
from maxkernel_tui.kernels.task import Task

# Primitives that return their operand unchanged (for values, not derivatives).
_IDENTITIES = {"stop_gradient", "copy", "copy_p", "optimization_barrier"}
# Parameters that must agree between the two traces (sizes are compared through the shapes).
_STRUCTURAL_PARAMS = (
    "axes",
    "broadcast_dimensions",
    "permutation",
    "dimension_numbers",
    "y",
    "new_dtype",
    "dimensions",
)


@dataclass(eq=False)
class Var:
    """A value of the program: its sizes (set once the walk has bound them, dataflow.py) and
    dtype, and its sizes at bench shapes (for messages)."""

    shape: tuple[Dim, ...]
    dtype: np.dtype
    bench_shape: tuple[int, ...]


@dataclass(frozen=True)
class Literal:
    """A scalar constant, with its values in the bench and the check trace."""

    bench: Any
    check: Any
    dtype: np.dtype

    def value(self, table: DimTable) -> Any:
        """The constant itself, or the size expression it stands for (e.g. a mean's divisor)."""
        if isinstance(self.bench, (bool, np.bool_)):
            return bool(self.bench)
        return table.literal(self.bench, self.check)


Operand = Var | Literal


@dataclass(eq=False)
class Eqn:
    primitive: str
    inputs: list[Operand]
    outputs: list[Var]
    params: dict[str, Any]

    @property
    def source(self) -> Var:
        """The value a view or transpose is of (constants are folded before they get one)."""
        operand = self.inputs[0]
        assert isinstance(operand, Var), f"`{self.primitive}` of a constant"
        return operand

    @property
    def reduces_unit_axes_only(self) -> bool:
        """For a reduction: whether it is over size-1 axes only (nothing to reduce)."""
        source = self.inputs[0]
        return isinstance(source, Var) and all(
            source.shape[axis].is_one() for axis in self.params["axes"]
        )


@dataclass
class Program:
    """The reference's computation: dynamic inputs, equations in order, outputs."""

    arg_names: list[str]  # every argument of computation(), dynamic first, then static
    inputs: list[Var]  # the dynamic arguments
    eqns: list[Eqn]
    outputs: list[Operand]
    dims: DimTable
    output_tree: Any  # the pytree structure of the reference's result
    # Arrays the reference captures (numpy constants), with their values in the bench and the
    # check trace: only a scan's decay prologue reads them (retention.py); the stage planner
    # refuses them.
    constants: dict[Var, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # Why the stage planner cannot hold a primitive the outputs need (None: it can hold them
    # all); the family recognisers (attention, MLA) read such programs whole.
    untranslatable: str | None = None


class Probe(Enum):
    """The configuration the reference is traced at beside bench: how sizes are told apart."""

    EVERY = "every input size apart"  # each class of tied input sizes scaled by its own factor
    VARYING = "varying input sizes apart"  # only classes that differ between bench and check
    BY_VALUE = "equal input sizes tied"  # the check shapes as they are; equal sizes are one


def trace_program(task: Task, probe: Probe = Probe.EVERY, *, strict: bool = True) -> Program:
    """The reference of `task`, traced at bench shapes and at a probe made from its check
    shapes (bench when it has none). Sizes are bound by where they flow (dataflow.py); the probe
    is where constants that follow a size (a mean's divisor) find it by value, so it makes
    sizes differ where the reference allows: every class of tied input sizes (Probe.EVERY), or
    only those that already differ between bench and check (Probe.VARYING: a constant such as
    1/sqrt(head_dim) then stays a constant). Probe.BY_VALUE ties input sizes of equal values,
    for plans that need coincident sizes to be one (attention's query and key lengths).
    Not `strict`: equations the stage planner cannot translate (top_k, cumsum, gathers) and
    sizes that follow no rule (kept at their bench value) are let through, for recognisers that
    read the program's structure and confirm their reading by running it (grouped.py)."""
    module = runtime.load_reference(task)
    bench = task.configs[0]
    second = CHECK if CHECK in task.configs else bench
    specs_b, static_b = runtime.input_specs(task, module, bench)
    specs_c, static_c = runtime.input_specs(task, module, second)
    jaxpr_b, shape_b = _traced(module.computation, specs_b, static_b)
    if probe is not Probe.BY_VALUE:
        every = probe is Probe.EVERY
        specs_c = _probe_specs(module.computation, jaxpr_b, specs_b, specs_c, static_c, every)
    try:
        jaxpr_c, _ = _traced(module.computation, specs_c, static_c)
    except Exception as error:  # the task's own check shapes are inconsistent
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CannotPlan(f"the reference does not trace at its {second} shapes: {first}") from None
    arg_names = argument_names(module.computation, len(specs_b) + len(static_b))
    builder = _Builder(SizeFlow(tie_equal_inputs=probe is Probe.BY_VALUE))
    inputs = [
        builder.input_var(b, c, position) for position, (b, c) in enumerate(zip(specs_b, specs_c))
    ]
    outputs = builder.walk(jaxpr_b, jaxpr_c, list(inputs))
    table = DimTable()
    for position, (b, c) in enumerate(zip(static_b, static_c), start=len(inputs)):
        if type(b) is int and type(c) is int and b != c and b > 1 and c > 1:
            table.static_symbol(b, c, position)
    builder.resolve(table)
    eqns = _live(builder.eqns, outputs)
    if strict:
        untranslatable = builder.check(eqns)
    else:  # the recognisers that read the program whole (grouped.py) take vague sizes too
        untranslatable = next(
            (builder.untranslatable[e] for e in eqns if e in builder.untranslatable), None
        )
    live = {i for eqn in eqns for i in eqn.inputs if isinstance(i, Var)}
    constants = {var: values for var, values in builder.constants.items() if var in live}
    return Program(
        arg_names,
        inputs,
        eqns,
        outputs,
        table,
        jax.tree.structure(shape_b),
        constants=constants,
        untranslatable=untranslatable,
    )


def _traced(computation: Any, specs: tuple, static: tuple) -> tuple[Any, Any]:
    return jax.make_jaxpr(lambda *dynamic: computation(*dynamic, *static), return_shape=True)(
        *specs
    )


def _probe_specs(
    computation: Any, jaxpr_b: Any, bench: tuple, check: tuple, static: tuple, every: bool
) -> tuple:
    """The check-shape input specs with sizes told apart. The bench trace's dataflow says which
    input sizes are one (a class); each class to tell apart is scaled by its own odd factor, and
    stays scaled when the reference still traces the same way. `every`: every class; else only
    the classes that differ between bench and check and coincide with another such class, and a
    plain convolution's taps (a held-out configuration may move them where check does not: a
    size that only coincides with them must not bind them)."""
    flow = SizeFlow()
    probe = _Builder(flow)
    try:
        inputs = [probe.input_var(spec, spec, position) for position, spec in enumerate(bench)]
        probe.walk(jaxpr_b, jaxpr_b, list(inputs))
    except CannotPlan:
        return check  # the real walk says why
    coinciding: dict[tuple[int, int], list[list[tuple[int, int]]]] = {}
    taps: list[tuple[bool, set[int]]] = []  # each convolution: transposed?, its taps' classes
    for eqn in probe.eqns:
        kernel = eqn.inputs[1] if eqn.primitive == "conv_general_dilated" else None
        if isinstance(kernel, Var):
            spatial = eqn.params["dimension_numbers"].rhs_spec[2:]
            found = {flow.find(probe.nodes[kernel][axis]) for axis in spatial}
            taps.append((is_transposed_conv(eqn.params), found))
    # A transposed convolution's taps stay: its output, stride * size + padding - taps, has no
    # rule of ours once they differ between the traces (dataflow.flow_transposed_conv).
    kept = set().union(*(found for transposed, found in taps if transposed))
    every_tap = set().union(*(found for _, found in taps))
    for root, axes in flow.input_classes().items():
        if root in kept:
            continue
        position, axis = axes[0]
        values = (bench[position].shape[axis], check[position].shape[axis])
        if values[0] != values[1] or every or root in every_tap:
            coinciding.setdefault(values, []).append(axes)
    shapes = [list(spec.shape) for spec in check]
    structure = _structure(computation, shapes, check, static)
    factor, alone = 3, []
    for classes in coinciding.values():
        for n, axes in enumerate(classes):
            tap = flow.find(probe.nodes[inputs[axes[0][0]]][axes[0][1]]) in every_tap
            if n == 0 and not every and not tap:
                continue  # the first of sizes that coincide stays: the others move apart from it
            trial = _scaled(shapes, axes, factor)
            if structure is not None and _structure(computation, trial, check, static) == structure:
                shapes, factor = trial, factor + 2
            elif not tap:
                alone.append(axes)  # a convolution's taps never move with another size
    # Classes that trace scaled only together: a size no input code shows ties them (a
    # LayerNorm's weights over a transposed convolution's output width, twice its input's). Only
    # beside a transposed convolution: elsewhere a pair moved together can make sizes coincide
    # anew (a plain convolution's output with its image's other sizes) and bind them wrongly.
    while kept and structure is not None and len(alone) > 1:
        pair = next(
            (
                (a, b)
                for i, a in enumerate(alone)
                for b in alone[i + 1 :]
                if _structure(computation, _scaled(shapes, a + b, factor), check, static)
                == structure
            ),
            None,
        )
        if pair is None:
            break
        shapes, factor = _scaled(shapes, pair[0] + pair[1], factor), factor + 2
        alone = [axes for axes in alone if axes not in pair]
    return tuple(
        jax.ShapeDtypeStruct(tuple(shape), spec.dtype) for shape, spec in zip(shapes, check)
    )


def _scaled(shapes: list[list[int]], axes: list[tuple[int, int]], factor: int) -> list[list[int]]:
    """The input shapes with these (input, axis) sizes multiplied by `factor`."""
    trial = [list(shape) for shape in shapes]
    for position, axis in axes:
        trial[position][axis] *= factor
    return trial


def _structure(
    computation: Any, shapes: list[list[int]], like: tuple, static: tuple
) -> list[str] | None:
    """The primitives of the reference traced at these shapes; None when it does not trace, or
    when a value of it is empty (a convolution's taps scaled past its image: its sizes and the
    constants made from them would read as nothing)."""
    specs = [jax.ShapeDtypeStruct(tuple(shape), spec.dtype) for shape, spec in zip(shapes, like)]
    try:
        traced = jax.make_jaxpr(lambda *dynamic: computation(*dynamic, *static))(*specs)
    except Exception:
        return None
    values = [v.aval for eqn in traced.jaxpr.eqns for v in eqn.outvars]
    if any(0 in getattr(value, "shape", ()) for value in values):
        return None
    return [eqn.primitive.name for eqn in traced.jaxpr.eqns]


def argument_names(computation: Any, count: int) -> list[str]:
    parameters = list(inspect.signature(computation).parameters.values())
    if (
        any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
        or len(parameters) < count
    ):
        raise ShapeRuleError(
            "the reference's computation takes *args or **kwargs; its signature is unclear"
        )
    return [p.name for p in parameters[:count]]


class _Builder:
    """Walks the two traces together, producing one list of equations; the sizes of every value
    are nodes of `flow` until `resolve` turns them into Dims."""

    def __init__(self, flow: SizeFlow) -> None:
        self.flow = flow
        self.nodes: dict[Var, Nodes] = {}
        self.eqns: list[Eqn] = []
        self.untranslatable: dict[Eqn, str] = {}  # why
        self.vague: dict[Var, str] = {}  # the size rule it breaks
        self.constants: dict[Var, tuple[np.ndarray, np.ndarray]] = {}

    def input_var(self, bench: Any, check: Any, position: int) -> Var:
        var = Var((), np.dtype(bench.dtype), tuple(bench.shape))
        self.nodes[var] = self.flow.input_nodes(tuple(bench.shape), tuple(check.shape), position)
        return var

    def resolve(self, table: DimTable) -> None:
        """Every value's sizes as Dims. A size that follows no rule keeps its bench value and
        the problem is noted: it only matters if the value survives dead-code removal."""
        resolver = self.flow.resolver(table)
        for var, nodes in self.nodes.items():
            dims, problems = [], []
            for node, bench in zip(nodes, var.bench_shape):
                try:
                    dims.append(resolver.dim(node))
                except ShapeRuleError as error:
                    dims.append(Dim.const(bench))
                    problems.append(str(error))
            var.shape = tuple(dims)
            if problems:
                self.vague[var] = problems[0]

    def check(self, live: list[Eqn]) -> str | None:
        """Raise for the first size among the equations the outputs need that follows no rule
        (saying first, when there is one, which primitive the planner cannot hold); return why
        the planner cannot hold one of them, or None."""
        untranslatable = next(
            (self.untranslatable[e] for e in live if e in self.untranslatable), None
        )
        for eqn in live:
            for var in eqn.outputs:
                if var in self.vague:
                    if untranslatable is not None:
                        raise CannotPlan(untranslatable)
                    raise ShapeRuleError(self.vague[var])
        return untranslatable

    def walk(self, closed_b: Any, closed_c: Any, args: list[Operand]) -> list[Operand]:
        jaxpr_b, consts_b = _open(closed_b)
        jaxpr_c, consts_c = _open(closed_c)
        if len(jaxpr_b.eqns) != len(jaxpr_c.eqns):
            raise ShapeRuleError(
                "the reference's program changes structure between bench and check shapes"
            )
        env: dict[Any, Operand] = {}
        for var, b, c in zip(jaxpr_b.constvars, consts_b, consts_c):
            env[var] = self._constant(b, c)
        env.update(zip(jaxpr_b.invars, args))
        for eqn_b, eqn_c in zip(jaxpr_b.eqns, jaxpr_c.eqns):
            _check_same_structure(eqn_b, eqn_c)
            inputs = [self._operand(env, vb, vc) for vb, vc in zip(eqn_b.invars, eqn_c.invars)]
            results = self._equation(eqn_b, eqn_c, inputs)
            env.update(zip(eqn_b.outvars, results))
        return [self._operand(env, vb, vc) for vb, vc in zip(jaxpr_b.outvars, jaxpr_c.outvars)]

    def _equation(self, eqn_b: Any, eqn_c: Any, inputs: list[Operand]) -> list[Operand]:
        name = eqn_b.primitive.name
        if name in CALL_BODIES:
            key = CALL_BODIES[name]
            return self.walk(eqn_b.params[key], eqn_c.params[key], inputs)
        if name in _IDENTITIES and len(inputs) == 1:
            return inputs
        if (
            name == "convert_element_type"
            and isinstance(inputs[0], Var)
            and inputs[0].dtype == np.dtype(eqn_b.params["new_dtype"])
        ):
            return inputs
        if (
            name == "select_n"
            and isinstance(inputs[0], Literal)
            and np.ndim(inputs[0].bench) == 0
            and inputs[0].bench == inputs[0].check
        ):
            return [inputs[1 + int(inputs[0].bench)]]
        literals = [i for i in inputs if isinstance(i, Literal)]
        if len(literals) == len(inputs) and _scalar_outputs(eqn_b):
            return self._fold(eqn_b, eqn_c, literals)
        outputs = [self._var(vb.aval, vc.aval) for vb, vc in zip(eqn_b.outvars, eqn_c.outvars)]
        operand_nodes = [self.nodes[i] if isinstance(i, Var) else None for i in inputs]
        result_nodes = [self.nodes[o] for o in outputs]
        if (
            name == "conv_general_dilated"
            and is_plain_conv(eqn_b.params)
            and None not in operand_nodes
        ):
            image, kernel = operand_nodes
            assert image is not None and kernel is not None
            flow_plain_conv(self.flow, image, kernel, result_nodes[0])
        elif (
            name == "conv_general_dilated"
            and is_transposed_conv(eqn_b.params)
            and None not in operand_nodes
        ):
            image, kernel = operand_nodes
            assert image is not None and kernel is not None
            flow_transposed_conv(self.flow, image, kernel, result_nodes[0], dict(eqn_b.params))
        uneven = None
        if name == "conv_general_dilated" and is_transposed_conv(eqn_b.params):
            uneven = next(  # at bench or at check shapes
                filter(
                    None,
                    (
                        uneven_phases(e.params, e.invars[0].aval.shape, e.invars[1].aval.shape)
                        for e in (eqn_b, eqn_c)
                    ),
                ),
                None,
            )
        else:
            flow_equation(self.flow, name, dict(eqn_b.params), operand_nodes, result_nodes)
        eqn = Eqn(name, inputs, list(outputs), dict(eqn_b.params))
        if uneven is not None:
            self.untranslatable[eqn] = uneven
        elif not is_translatable(name, len(inputs)):
            shapes = ", ".join(
                str(tuple(v.aval.shape)) for v in eqn_b.invars if hasattr(v.aval, "shape")
            )
            self.untranslatable[eqn] = (
                f"the reference uses `{name}` ({shapes}), which the built-in agent "
                "does not translate into a kernel"
            )
        self.eqns.append(eqn)
        return list(outputs)

    def _var(self, bench: Any, check: Any) -> Var:
        """A new value; its sizes are resolved once the walk is over."""
        var = Var((), np.dtype(bench.dtype), tuple(bench.shape))
        self.nodes[var] = self.flow.nodes(tuple(bench.shape), tuple(check.shape))
        return var

    def _fold(self, eqn_b: Any, eqn_c: Any, inputs: list[Literal]) -> list[Operand]:
        """Scalar arithmetic on constants, evaluated once per trace."""
        # a Literal holds one value; the equation may read it as a one-element array
        shapes_b = [getattr(v.aval, "shape", ()) for v in eqn_b.invars]
        shapes_c = [getattr(v.aval, "shape", ()) for v in eqn_c.invars]
        bench = eqn_b.primitive.bind(
            *[np.asarray(i.bench, i.dtype).reshape(s) for i, s in zip(inputs, shapes_b)],
            **eqn_b.params,
        )
        check = eqn_c.primitive.bind(
            *[np.asarray(i.check, i.dtype).reshape(s) for i, s in zip(inputs, shapes_c)],
            **eqn_c.params,
        )
        if not eqn_b.primitive.multiple_results:
            bench, check = [bench], [check]
        return [
            Literal(np.asarray(b).item(), np.asarray(c).item(), np.dtype(v.aval.dtype))
            for b, c, v in zip(bench, check, eqn_b.outvars)
        ]

    def _operand(self, env: dict[Any, Operand], var_b: Any, var_c: Any) -> Operand:
        if isinstance(var_b, core.Literal):
            aval: Any = var_b.aval  # a ShapedArray: jax types it as any abstract value
            return Literal(
                np.asarray(var_b.val).item(), np.asarray(var_c.val).item(), np.dtype(aval.dtype)
            )
        return env[var_b]

    def _constant(self, bench: Any, check: Any) -> Operand:
        """A scalar constant as a Literal; an array as a value of its own, its sizes bound by
        where it flows and its values kept for each trace."""
        bench, check = np.asarray(bench), np.asarray(check)
        if bench.size != 1 or check.size != 1:
            var = self._var(bench, check)
            self.constants[var] = (bench, check)
            return var
        return Literal(bench.item(), check.item(), bench.dtype)


def _open(closed: Any) -> tuple[Any, list[Any]]:
    if isinstance(closed, core.ClosedJaxpr):
        return closed.jaxpr, list(closed.consts)
    return closed, []


def _check_same_structure(eqn_b: Any, eqn_c: Any) -> None:
    if eqn_b.primitive is not eqn_c.primitive or any(
        str(eqn_b.params.get(k)) != str(eqn_c.params.get(k)) for k in _STRUCTURAL_PARAMS
    ):
        raise ShapeRuleError(
            f"the reference's `{eqn_b.primitive.name}` differs between bench and check shapes"
        )


def _scalar_outputs(eqn: Any) -> bool:
    return all(math.prod(v.aval.shape) == 1 for v in eqn.outvars)


def _live(eqns: list[Eqn], outputs: list[Operand]) -> list[Eqn]:
    """The equations the outputs depend on, in their original order."""
    needed = {o for o in outputs if isinstance(o, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(eqns):
        if any(o in needed for o in eqn.outputs):
            kept.append(eqn)
            needed.update(i for i in eqn.inputs if isinstance(i, Var))
    return kept[::-1]
