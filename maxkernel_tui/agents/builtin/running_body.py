"""A running epilogue (running.py) -> the jnp source of its kernel function: what each column
block folds into the statistics, and the finishing step that turns them into the row results.

Values are written as epilogue.py writes them, equation by equation, but on demand: the block
step computes the block-local values each statistic needs; the finishing step computes the
row values of the results from the statistics (and, under a pick, the element-wise functions
of the picked elements). No jax here.
"""

from __future__ import annotations

import numpy as np

from maxkernel_tui.agents.builtin.dims import DimTable
from maxkernel_tui.agents.builtin.epilogue import BodyEmitter, KernelBody
from maxkernel_tui.agents.builtin.layout import GROUP_ROW
from maxkernel_tui.agents.builtin.primitives import (
    REDUCTIONS,
    VIEWS,
    dtype_source,
    picks_one_per_row,
)
from maxkernel_tui.agents.builtin.program import Eqn, Operand, Var
from maxkernel_tui.agents.builtin.running import (
    INITIAL,
    RunningEpilogue,
    RunningStatistic,
    Statistic,
)
from maxkernel_tui.agents.builtin.stages import MatmulStage, OperandRole

_FOLD = {
    Statistic.SUM: "{ref}[...] + {part}",
    Statistic.MIN: "jnp.minimum({ref}[...], {part})",
}


def emit_running_body(
    stage: MatmulStage,
    running: RunningEpilogue,
    table: DimTable,
    symbol_names: dict[str, str],
    ref_names: dict[Var, str],
) -> KernelBody:
    """`step_lines`: one column block folded into the statistics (`stat{n}_ref`); `lines`: the
    finishing step; `accumulators`: each statistic's (role, initial value)."""
    return _RunningEmitter(stage, running, table, symbol_names, ref_names).run_running()


class _RunningEmitter(BodyEmitter):
    def __init__(
        self,
        stage: MatmulStage,
        running: RunningEpilogue,
        table: DimTable,
        symbol_names: dict[str, str],
        ref_names: dict[Var, str],
    ) -> None:
        super().__init__(stage, table, symbol_names, ref_names)
        self.running = running
        self.producer = {o: e for e in stage.eqns for o in e.outputs}
        self.finishing = False
        self.maxima: dict[RunningStatistic, tuple[str, str]] = {}  # its (old, new) values

    def run_running(self) -> KernelBody:
        self.lines = self.step_lines
        result = self.stage.head_result
        assert result is not None
        cast = "" if result.dtype == np.float32 else f".astype({dtype_source(result.dtype)})"
        self._assign(result, f"acc_ref[...]{cast}")
        self.keywords.add("col")
        for number, statistic in enumerate(self.running.statistics):
            self._fold(number, statistic)
        self.lines, self.values, self.finishing = self.finish_lines, {}, True
        for number, statistic in enumerate(self.running.statistics):
            if statistic.kind is not Statistic.PICK:
                self._assign(statistic.eqn.outputs[0], _read(number, statistic.eqn.outputs[0]))
        for var in self.stage.outputs:
            self.lines.append(f"{self.ref_names[var]}[...] = {self._operand(var)}")
        return KernelBody(
            self.finish_lines,
            [k for k in ("tm", "tn", "cols") if k in self.keywords]
            + sorted(self.keywords - {"tm", "tn", "cols", "col"}),
            self.helpers,
            self.temporaries,
            self.step_lines,
            [(OperandRole.ROW, INITIAL[s.kind]) for s in self.running.statistics],
        )

    # -- one column block --------------------------------------------------------------------
    def _fold(self, number: int, statistic: RunningStatistic) -> None:
        ref = f"stat{number}_ref"
        if statistic.kind is Statistic.RESCALED_SUM:
            self._fold_rescaled(ref, statistic)
            return
        if statistic.kind is Statistic.PICK:
            assert statistic.index is not None
            self.keywords.update(("tm", "tn"))
            position = "jax.lax.broadcasted_iota(jnp.int32, (tm, tn), 1) + col"
            hit = (
                f"jnp.where({position} == {self._operand(statistic.index)}, "
                f"{self._operand(statistic.source)}, 0)"
            )
            self.lines.append(
                f"{ref}[...] = {ref}[...] + "
                f"jnp.sum({hit}, axis=1, keepdims=True).astype(jnp.float32)"
            )
            return
        reduced = self._operand(statistic.source)
        part = f"{REDUCTIONS[statistic.eqn.primitive]}({reduced}, axis=1, keepdims=True)"
        kind = self.stage.kinds[statistic.source]
        if kind.name == GROUP_ROW and statistic.kind is Statistic.SUM:
            part += f" / {self._width(kind)}"  # every column of a group row holds its group's value
        part = f"{part}.astype(jnp.float32)"
        if statistic.kind is Statistic.MAX:
            old, new = f"m{number}_old", f"m{number}_new"
            self.lines += [
                f"{old} = {ref}[...]",
                f"{new} = jnp.maximum({old}, {part})",
                f"{ref}[...] = {new}",
            ]
            self.maxima[statistic] = (old, new)
            return
        self.lines.append(f"{ref}[...] = {_FOLD[statistic.kind].format(ref=ref, part=part)}")

    def _fold_rescaled(self, ref: str, statistic: RunningStatistic) -> None:
        """sum(exp(a - b(max))): what is summed so far was shifted by b(old max); rescaled to
        b(new max) before this block's terms are added (zero stays zero, even when exp of the
        shift's change overflows)."""
        assert statistic.follows is not None and statistic.shift and statistic.summed
        old, new = self.maxima[statistic.follows]
        maximum = statistic.follows.eqn.outputs[0]
        kept = self.values
        self.values = dict(kept)
        self._assign(maximum, _cast(old, maximum))
        shift_old = self._operand(statistic.shift)
        self.values = dict(kept)
        self._assign(maximum, _cast(new, maximum))
        shift_new = self._operand(statistic.shift)
        summed = self._operand(statistic.summed)
        self.values = kept
        so_far = f"{ref.removesuffix('_ref')}_kept"
        factor = f"jnp.exp(({shift_old} - {shift_new}).astype(jnp.float32))"
        self.lines += [
            f"{so_far} = {ref}[...]",
            f"{ref}[...] = jnp.where({so_far} == 0, 0.0, {so_far} * {factor}) + "
            f"jnp.sum({summed}, axis=1, keepdims=True).astype(jnp.float32)",
        ]

    # -- values on demand --------------------------------------------------------------------
    def _operand(self, operand: Operand) -> str:
        if isinstance(operand, Var) and operand not in self.values and operand in self.producer:
            self._equation(self.producer[operand])
            return self.values[operand]
        return super()._operand(operand)

    def _equation(self, eqn: Eqn) -> None:
        if self.finishing and picks_one_per_row(eqn.primitive, eqn.params):
            self._finish_pick(eqn)
        elif self.finishing and eqn.primitive in VIEWS:
            self._alias(eqn.outputs[0], eqn.inputs[0])  # every finishing value is (tm, 1)
        else:
            super()._equation(eqn)

    def _finish_pick(self, eqn: Eqn) -> None:
        """The picked value: the element-wise arithmetic between the pick and the tile, done on
        the picked elements; NaN where the index is out of range, as the reference's gather."""
        kept = self.values
        self.values = dict(kept)
        for statistic in self.running.picks[eqn]:
            number = self.running.statistics.index(statistic)
            self._assign(statistic.source, _read(number, statistic.source))
        picked = self._operand(eqn.inputs[0])
        self.values = kept
        index = self._operand(eqn.inputs[1])
        self.keywords.add("cols")
        result = eqn.outputs[0]
        inside = f"jnp.logical_and({index} >= 0, {index} < cols)"
        self._assign(
            result,
            f"jnp.where({inside}, {picked}.astype(jnp.float32), jnp.nan)"
            f".astype({dtype_source(result.dtype)})",
        )


def _read(number: int, var: Var) -> str:
    return _cast(f"stat{number}_ref[...]", var)


def _cast(value: str, var: Var) -> str:
    return value if var.dtype == np.float32 else f"{value}.astype({dtype_source(var.dtype)})"
