"""jaxpr equations of one stage -> the jnp source of its kernel body.

Each equation becomes one line on 2-D blocks (layout.py): `(tm, tn)` tiles, `(tm, 1)` rows,
`(1, tn)` columns, `(1, 1)` scalars. Group rows are kept expanded to `(tm, tn)` (every column
holds its group's value), so group statistics never leave the lane-dense tile layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from maxkernel_tui.agents.builtin.dims import DimTable, ShapeLiteral
from maxkernel_tui.agents.builtin.layout import (
    COL,
    GROUP_ROW,
    PERIODIC_COL,
    ROW,
    ROW_GROUP,
    SCALAR,
    TILE,
    Kind,
    same_layout,
)
from maxkernel_tui.agents.builtin.planner import finished, reduces_images, reduces_rows
from maxkernel_tui.agents.builtin.primitives import (
    ELEMENTWISE,
    REDUCTIONS,
    dtype_source,
    is_elementwise,
    picks_one_per_row,
)
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Var
from maxkernel_tui.agents.builtin.stages import MatmulStage, OperandRole, Stage

_PREFIX = {
    TILE: "y",
    GROUP_ROW: "g",
    ROW: "r",
    ROW_GROUP: "q",
    COL: "c",
    PERIODIC_COL: "c",
    SCALAR: "s",
}
_KERNEL_SHAPE = {
    TILE: "(tm, tn)",
    GROUP_ROW: "(tm, tn)",
    ROW: "(tm, 1)",
    ROW_GROUP: "(tm, 1)",
    COL: "(1, tn)",
    PERIODIC_COL: "(1, tn)",  # repeated over the block's columns outside the kernel
    SCALAR: "(1, 1)",
}
GROUP_HELPER = "group_totals"
ROW_GROUP_HELPER = "row_group_totals"


# A reduction over rows yields one value per column, or a single value.
_ACCUMULATOR_ROLE = {COL: OperandRole.COL, SCALAR: OperandRole.SCALAR, ROW: OperandRole.ROW}
_IDENTITY = {"reduce_sum": "0.0", "reduce_max": "-jnp.inf", "reduce_min": "jnp.inf"}
_ACCUMULATE = {
    "reduce_sum": "{acc} + {part}",
    "reduce_max": "jnp.maximum({acc}, {part})",
    "reduce_min": "jnp.minimum({acc}, {part})",
}


@dataclass
class KernelBody:
    lines: list[str]  # the body; in a column-reduction stage, what runs after the last row block
    keywords: list[str]  # keyword arguments the body reads: tm, tn, size symbols
    helpers: set[str] = field(default_factory=set)
    tile_temporaries: int = 0  # tile-sized values the body computes (for the VMEM estimate)
    step_lines: list[str] = field(default_factory=list)  # column-reduction stages: every row block
    # Column-reduction stages: (role, initial value as source) of each f32 accumulator.
    accumulators: list[tuple[OperandRole, str]] = field(default_factory=list)


def head_sums(stage: Stage) -> list[str]:
    """The epilogue's first parameters, one per head: where it finds each finished sum (a
    matmul's accumulator ref and one per sibling, a convolution's local value)."""
    if not isinstance(stage, MatmulStage):
        return ["acc"] if stage.heads else []
    return ["acc_ref", *(f"sibling{n}_ref" for n in range(1, len(stage.heads)))]


def emit_body(
    stage: Stage, table: DimTable, symbol_names: dict[str, str], ref_names: dict[Var, str]
) -> KernelBody:
    """The statements that compute the stage's outputs from its refs (and accumulator)."""
    return BodyEmitter(stage, table, symbol_names, ref_names).run()


class BodyEmitter:
    def __init__(
        self, stage: Stage, table: DimTable, symbol_names: dict[str, str], ref_names: dict[Var, str]
    ):
        self.stage = stage
        self.table = table
        self.symbol_names = symbol_names
        self.ref_names = ref_names
        self.values: dict[Var, str] = {}
        self.finish_lines: list[str] = []
        self.step_lines: list[str] = []
        self.lines = self.finish_lines  # where the next statement goes
        self.accumulators: list[tuple[OperandRole, str]] = []
        self.keywords: set[str] = set()
        self.helpers: set[str] = set()
        self.temporaries = 0
        self.counter = 0

    def run(self) -> KernelBody:
        # the matmul's accumulator scratch (and its siblings'), or the convolution's local sum
        loaded = "[...]" if isinstance(self.stage, MatmulStage) else ""
        for name, head in zip(head_sums(self.stage), self.stage.heads):
            result = head.result
            cast = "" if result.dtype == np.float32 else f".astype({dtype_source(result.dtype)})"
            self._assign(result, f"{name}{loaded}{cast}")
        for eqn in self.stage.eqns:
            self._equation(eqn)
        for var in self.stage.outputs:
            self.lines.append(f"{self.ref_names[var]}[...] = {self._operand(var)}")
        ordered = [k for k in ("tm", "tn") if k in self.keywords] + sorted(
            self.keywords - {"tm", "tn"}
        )
        return KernelBody(
            self.finish_lines,
            ordered,
            self.helpers,
            self.temporaries,
            self.step_lines,
            self.accumulators,
        )

    # -- operands ------------------------------------------------------------------------------
    def _operand(self, operand: Operand) -> str:
        if isinstance(operand, Literal):
            return self._literal(operand)
        if operand not in self.values:  # a stage input: load its block where it is first used
            self._assign(operand, f"{self.ref_names[operand]}[...]")
        return self.values[operand]

    def _literal(self, literal: Literal) -> str:
        value = literal.value(self.table)
        if isinstance(value, ShapeLiteral):
            self.keywords.update(self.symbol_names[s] for s in value.dim.symbols + value.dim.over)
            if np.issubdtype(literal.dtype, np.integer) and not value.reciprocal:
                return value.dim.render(self.symbol_names)
            return value.render(self.symbol_names)
        if isinstance(value, bool):
            return str(value)
        if np.issubdtype(literal.dtype, np.integer):
            return str(int(value))
        value = float(value)
        if math.isnan(value):
            return "jnp.nan"
        if math.isinf(value):
            return "jnp.inf" if value > 0 else "-jnp.inf"
        return repr(value)

    def _assign(self, var: Var, expression: str) -> None:
        kind = self.stage.kinds[var]
        name = f"{_PREFIX[kind.name]}{self.counter}"
        self.counter += 1
        self.lines.append(f"{name} = {expression}")
        self.values[var] = name
        if kind.name in (TILE, GROUP_ROW):
            self.temporaries += 1

    def _alias(self, var: Var, source: Operand) -> None:
        self.values[var] = self._operand(source)

    def _shape(self, kind: Kind) -> str:
        shape = _KERNEL_SHAPE[kind.name]
        self.keywords.update(k for k in ("tm", "tn") if k in shape)
        return shape

    def _width(self, kind: Kind) -> str:
        assert kind.width is not None
        self.keywords.update(self.symbol_names[s] for s in kind.width.symbols + kind.width.over)
        return kind.width.render(self.symbol_names)

    # -- equations -----------------------------------------------------------------------------
    def _equation(self, eqn: Eqn) -> None:
        result = eqn.outputs[0]
        result_kind = self.stage.kinds[result]
        source_kind = self.stage.kind(eqn.inputs[0])
        if self.stage.reduces_rows and not finished(self.stage, result_kind):
            # A column-reduction stage's values per block (the tiles it reduces): computed at
            # every row block, before the reduction reads them.
            self.lines = self.step_lines
            self._translate(eqn, source_kind, result_kind)
            self.lines = self.finish_lines
            return
        self._translate(eqn, source_kind, result_kind)

    def _translate(self, eqn: Eqn, source_kind: Kind, result_kind: Kind) -> None:
        result = eqn.outputs[0]
        if is_elementwise(eqn.primitive, len(eqn.inputs)):
            arguments = [self._operand(o) for o in eqn.inputs]
            self._assign(result, ELEMENTWISE[eqn.primitive](arguments, eqn.params))
        elif eqn.primitive in REDUCTIONS:
            self._reduction(eqn, source_kind, result_kind)
        elif picks_one_per_row(eqn.primitive, eqn.params):
            self._pick(eqn)
        elif same_layout(source_kind, result_kind) or {source_kind.name, result_kind.name} == {
            TILE,
            GROUP_ROW,
        }:
            self._alias(result, eqn.inputs[0])  # a reshape or broadcast the 2-D layout already has
        else:
            self._assign(
                result,
                f"jnp.broadcast_to({self._operand(eqn.inputs[0])}, {self._shape(result_kind)})",
            )

    def _pick(self, eqn: Eqn) -> None:
        """x[r, idx[r]] for every row: the block spans all columns, so a one-hot select over the
        column positions finds it; an index out of range gives NaN, as the reference's gather
        (selected in f32: Mosaic cannot broadcast a narrow scalar into a (tm, 1) column)."""
        tile, index = self._operand(eqn.inputs[0]), self._operand(eqn.inputs[1])
        self.keywords.update(("tm", "tn"))
        column = f"jax.lax.broadcasted_iota(jnp.int32, (tm, tn), 1) == {index}"
        picked = (
            f"jnp.sum(jnp.where({column}, {tile}, 0), axis=1, keepdims=True).astype(jnp.float32)"
        )
        inside = f"jnp.logical_and({index} >= 0, {index} < tn)"
        result = eqn.outputs[0]
        self._assign(
            result, f"jnp.where({inside}, {picked}, jnp.nan).astype({dtype_source(result.dtype)})"
        )

    def _reduction(self, eqn: Eqn, source: Kind, result: Kind) -> None:
        if self.stage.reduces_rows and reduces_rows(source, result):
            self._accumulate(eqn, result, axis=0)
            return
        if self.stage.reduces_rows and reduces_images(source, result):
            self._accumulate(eqn, result, axis=1)  # each image's columns, summed over images
            return
        value = self._operand(eqn.inputs[0])
        var = eqn.outputs[0]
        if eqn.reduces_unit_axes_only:
            self._alias(var, eqn.inputs[0])  # over size-1 axes only: nothing to reduce
            return
        function = REDUCTIONS[eqn.primitive]
        if result.name == ROW_GROUP:  # a convolution's channel groups: rows, then their groups
            self.helpers.add(ROW_GROUP_HELPER)
            rows = f"{function}({value}, axis=1, keepdims=True)"
            self._assign(var, f"_row_group_totals({rows}, {self._width(result)})")
        elif result.name == COL and source.name == TILE:  # every channel of a convolution
            self._assign(var, f"{function}({value}, axis=0, keepdims=True)")
        elif result.name == SCALAR and source.name == TILE:  # a convolution's whole image
            self._assign(var, f"{function}({value}, axis=(0, 1), keepdims=True)")
        elif result.name == GROUP_ROW:
            self.helpers.add(GROUP_HELPER)
            self._assign(var, f"_group_totals({value}, {self._width(result)})")
        elif source.name == GROUP_ROW and eqn.primitive == "reduce_sum":
            # Every column of an expanded group row holds its group's value: width copies each.
            self._assign(var, f"{function}({value}, axis=1, keepdims=True) / {self._width(source)}")
        else:
            self._assign(var, f"{function}({value}, axis=1, keepdims=True)")

    def _accumulate(self, eqn: Eqn, result: Kind, axis: int) -> None:
        """A reduction over rows (or images): each row block (image) adds its partial result,
        reduced over `axis` of the block, to f32 scratch; the total is read after the last."""
        accumulator = f"acc{len(self.accumulators)}_ref"
        self.accumulators.append((_ACCUMULATOR_ROLE[result.name], _IDENTITY[eqn.primitive]))
        self.lines = self.step_lines
        operand = self._operand(eqn.inputs[0])
        part = f"{REDUCTIONS[eqn.primitive]}({operand}, axis={axis}, keepdims=True)"
        total = _ACCUMULATE[eqn.primitive].format(
            acc=f"{accumulator}[...]", part=f"{part}.astype(jnp.float32)"
        )
        self.lines.append(f"{accumulator}[...] = {total}")
        self.lines = self.finish_lines
        var = eqn.outputs[0]
        cast = "" if var.dtype == np.float32 else f".astype({dtype_source(var.dtype)})"
        self._assign(var, f"{accumulator}[...]{cast}")
