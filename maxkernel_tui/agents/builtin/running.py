"""Whether a matmul's row-wise epilogue can run across column blocks with running statistics,
and which statistics it carries (pieces/running.py runs them). No jax.

A block of whole rows is not needed when every value that leaves the stage is a row value and
each row value reaches the (rows, cols) tile only through
- a sum, max or min over the columns of a value each block computes alone (block-local): the
  running total is the total;
- a sum of `exp(a - b)` where `a` is block-local and `b` a row value that follows one running
  max (a logsumexp, a softmax's denominator): the running sum is rescaled by
  `exp(b(old max) - b(new max))` each time the max grows, as flash attention does;
- an element picked per row by a column index (`take_along_axis`): the block holding it adds it;
  element-wise arithmetic between the pick and the tile is applied to the picked values
  instead, which is exact (an element-wise function of the picked element is the picked element
  of the function).
Anything else (a tile-sized result, a tile value shifted by a row statistic and reduced some
other way) needs whole rows, or a second pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from maxkernel_tui.agents.builtin.layout import GROUP_ROW, ROW, TILE, Kind
from maxkernel_tui.agents.builtin.primitives import (
    REDUCTIONS,
    VIEWS,
    is_elementwise,
    picks_one_per_row,
)
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Var
from maxkernel_tui.agents.builtin.stages import MatmulStage


class Statistic(StrEnum):
    """What a running statistic carries from one column block to the next."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"
    RESCALED_SUM = "rescaled sum"  # of exp(a - b(max)), rescaled as the max grows
    PICK = "pick"  # the element at a row's column index, from the block that holds it


_BY_REDUCTION = {
    "reduce_sum": Statistic.SUM,
    "reduce_max": Statistic.MAX,
    "reduce_min": Statistic.MIN,
}
INITIAL = {
    Statistic.SUM: "0.0",
    Statistic.MAX: "-jnp.inf",
    Statistic.MIN: "jnp.inf",
    Statistic.RESCALED_SUM: "0.0",
    Statistic.PICK: "0.0",
}


@dataclass(frozen=True, eq=False)
class RunningStatistic:
    kind: Statistic
    eqn: Eqn  # the reduction or pick of the reference it carries
    source: Var  # the block-local value reduced, exponentiated (a) or picked
    index: Operand | None = None  # PICK: each row's column index
    follows: RunningStatistic | None = None  # RESCALED_SUM: the running max its shift follows
    shift: Var | None = None  # RESCALED_SUM: the row value b subtracted before exp
    summed: Var | None = None  # RESCALED_SUM: the value the reduction sums (exp(a - b), cast)


@dataclass
class RunningEpilogue:
    """The statistics of a running epilogue in the order the reference computes them, and for
    each pick the statistics of the block-local values it is an element-wise function of."""

    statistics: list[RunningStatistic]
    picks: dict[Eqn, list[RunningStatistic]] = field(default_factory=dict)
    group_widths: list[Kind] = field(default_factory=list)  # column blocks keep groups whole


def running_epilogue(stage: MatmulStage) -> RunningEpilogue | None:
    """The running statistics of the stage's epilogue; None when it needs whole rows."""
    if stage.batched or not stage.full_cols or not stage.outputs:
        return None
    return _Analysis(stage).run()


class _Analysis:
    def __init__(self, stage: MatmulStage) -> None:
        self.stage = stage
        self.producer = {o: e for e in stage.eqns for o in e.outputs}
        self.local_memo: dict[Var, bool] = {}
        self.carried: dict[Eqn, RunningStatistic] = {}  # reductions and their statistic
        self.statistics: list[RunningStatistic] = []
        self.picks: dict[Eqn, list[RunningStatistic]] = {}

    def run(self) -> RunningEpilogue | None:
        for eqn in self.stage.eqns:
            if _reduces_cols(eqn, self.stage):
                if not self._reduction(eqn):
                    return None
            elif picks_one_per_row(eqn.primitive, eqn.params) and not self._pick(eqn):
                return None
        if not all(self._finishable(v) for v in self.stage.outputs):
            return None
        widths = [k for k in self.stage.kinds.values() if k.width is not None]
        return RunningEpilogue(self.statistics, self.picks, widths)

    def kind(self, operand: Operand) -> Kind | None:
        return None if isinstance(operand, Literal) else self.stage.kinds.get(operand)

    def local(self, operand: Operand) -> bool:
        """Whether each column block computes it alone: from the block's inputs, never from a
        reduction over the columns."""
        if isinstance(operand, Literal) or operand not in self.producer:
            return True  # a constant, the matmul's result or an input of the stage
        if operand not in self.local_memo:
            eqn = self.producer[operand]
            self.local_memo[operand] = (
                not _reduces_cols(eqn, self.stage)
                and not picks_one_per_row(eqn.primitive, eqn.params)
                and all(self.local(i) for i in eqn.inputs)
            )
        return self.local_memo[operand]

    def _add(self, statistic: RunningStatistic) -> RunningStatistic:
        self.statistics.append(statistic)
        return statistic

    def _reduction(self, eqn: Eqn) -> bool:
        source = eqn.inputs[0]
        assert isinstance(source, Var)  # a column reduction of a constant is folded
        if self.local(source):
            self.carried[eqn] = self._add(
                RunningStatistic(_BY_REDUCTION[eqn.primitive], eqn, source)
            )
            return True
        rescaled = self._rescaled(eqn) if eqn.primitive == "reduce_sum" else None
        if rescaled is None:
            return False
        self.carried[eqn] = self._add(rescaled)
        return True

    def _rescaled(self, eqn: Eqn) -> RunningStatistic | None:
        """sum(exp(a - b)) with `a` block-local and `b` a row value of one running max."""
        summed = eqn.inputs[0]
        assert isinstance(summed, Var)
        exponential = self._through(summed, ("convert_element_type",))
        if exponential is None or exponential.primitive != "exp":
            return None
        difference = self._through(exponential.inputs[0], ("convert_element_type",))
        if difference is None or difference.primitive != "sub":
            return None
        a, b = difference.inputs
        if not isinstance(a, Var) or not isinstance(b, Var) or not self.local(a):
            return None
        a_kind = self.kind(a)
        if a_kind is None or a_kind.name != TILE:
            return None
        while (kind := self.kind(b)) is not None and kind.spans_cols:
            producer = self.producer.get(b)
            if producer is None or producer.primitive not in VIEWS:
                return None
            b = producer.source
        if self.kind(b) != Kind(ROW) or not self._finishable(b):
            return None
        followed = {self.carried[e] for e in self._statistics_under(b)}
        if len(followed) != 1:
            return None
        (maximum,) = followed
        if maximum.kind is not Statistic.MAX:
            return None
        return RunningStatistic(
            Statistic.RESCALED_SUM, eqn, a, follows=maximum, shift=b, summed=summed
        )

    def _through(self, operand: Operand, skipped: tuple[str, ...]) -> Eqn | None:
        """The equation producing `operand`, looking through `skipped` primitives."""
        while isinstance(operand, Var) and operand in self.producer:
            eqn = self.producer[operand]
            if eqn.primitive not in skipped:
                return eqn
            operand = eqn.inputs[0]
        return None

    def _statistics_under(self, var: Var) -> set[Eqn]:
        """The column reductions a row value depends on."""
        found: set[Eqn] = set()
        pending = [var]
        while pending:
            value = pending.pop()
            eqn = self.producer.get(value)
            if eqn is None or self.local(value):
                continue
            if eqn in self.carried or eqn in self.picks:
                found.add(eqn)
                continue
            pending.extend(i for i in eqn.inputs if isinstance(i, Var))
        return found

    def _pick(self, eqn: Eqn) -> bool:
        tile, index = eqn.inputs
        leaves = self._leaves(tile)
        if leaves is None or not self.local(index):
            return False
        self.picks[eqn] = [
            self._add(RunningStatistic(Statistic.PICK, eqn, leaf, index=index)) for leaf in leaves
        ]
        return True

    def _leaves(self, operand: Operand) -> list[Var] | None:
        """The block-local tiles and columns that a picked value is an element-wise function
        of (row values come from the finishing step); None when it is not one."""
        kind = self.kind(operand)
        if isinstance(operand, Literal) or kind is None or not kind.spans_cols:
            return [] if self._finishable(operand) else None
        if kind.name == GROUP_ROW:
            return None
        if self.local(operand):
            return [operand]
        eqn = self.producer[operand]
        if not (is_elementwise(eqn.primitive, len(eqn.inputs)) or eqn.primitive in VIEWS):
            return None
        leaves: list[Var] = []
        for source in eqn.inputs:
            found = self._leaves(source)
            if found is None:
                return None
            leaves += [leaf for leaf in found if leaf not in leaves]
        return leaves

    def _finishable(self, operand: Operand) -> bool:
        """Whether the finishing step computes it: a row or scalar value of statistics, picks
        and the stage's row inputs."""
        kind = self.kind(operand)
        if isinstance(operand, Literal):
            return True
        if kind is None or kind.spans_cols:
            return False
        eqn = self.producer.get(operand)
        if eqn is None or eqn in self.carried or eqn in self.picks:
            return True
        return all(self._finishable(i) for i in eqn.inputs)


def _reduces_cols(eqn: Eqn, stage: MatmulStage) -> bool:
    """A reduction over the columns of the frame (to one value per row)."""
    if eqn.primitive not in REDUCTIONS or eqn.reduces_unit_axes_only:
        return False
    source = eqn.inputs[0]
    source_kind = stage.kind(source)
    return source_kind.spans_cols and not stage.kind(eqn.outputs[0]).spans_cols
