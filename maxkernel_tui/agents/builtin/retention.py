"""Recognising a decayed causal scan in the reference's program, in its quadratic form:

    scores = (Q K^T) * D;  out = weights_dtype(scores / divisor(sum_keys row_term(scores))) V

where D is a decay matrix built without Q, K or V from a decay vector: a log-rate per head
(D[h, i, j] = exp(r_h * (i - j)), RetNet's retention) or a cumulative log-decay per position
(D[b, h, i, j] = exp(c_i - c_j), Mamba-2's SSD), zero above the diagonal. The program must hold
exactly two matmuls: Q K^T contracting the head dimension of two 4-D (batch, heads, seq, dim)
inputs, then the weights times a third input V. What each row sums (row_term: |scores| or the
scores themselves), how the sum becomes the divisor (a floor, tiny sums replaced) and the
prologue that makes the decay vector (a cumsum of log-decays, or a captured per-head table) are
the reference's own equations, which the kernel file writes back as jnp. Everything is found by
dataflow (which value feeds which equation), never by a name. Imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.primitives import VIEWS, is_elementwise
from maxkernel_tui.agents.builtin.program import Eqn, Operand, Program, Var

_SCORES_NUMBERS = (((3,), (3,)), ((0, 1), (0, 1)))  # (b, h, i, d) x (b, h, j, d) -> (b, h, i, j)
_VALUES_NUMBERS = (((3,), (2,)), ((0, 1), (0, 1)))  # (b, h, i, j) x (b, h, j, e) -> (b, h, i, e)
_PASS_THROUGH = ("convert_element_type", *VIEWS)
_PROLOGUE_PRIMITIVES = ("cumsum", "iota", *VIEWS)


class DecayKind(Enum):
    """The decay vector's form; the values are the piece's `decay` names."""

    HEAD_RATE = "head_rate"  # (heads,): D = exp(r_h * (i - j))
    CUMULATIVE = "cumulative"  # (batch, heads, seq): D = exp(c_i - c_j)


@dataclass(frozen=True)
class Chain:
    """Equations that turn `start` into `end`, in program order (empty when they are one)."""

    start: Var
    end: Operand
    eqns: tuple[Eqn, ...]


@dataclass(frozen=True)
class RetentionSpec:
    query: int  # positions among the dynamic arguments
    key: int
    value: int
    decay: DecayKind
    vector: Var  # the decay vector
    prologue: tuple[Eqn, ...]  # the equations making it from inputs and captured constants
    row_term: Chain  # decayed scores -> what each row sums
    divisor: Chain  # the row's sum -> its divisor
    weights_dtype: np.dtype  # what the reference rounds the divided scores to
    out_dtype: np.dtype

    @property
    def statistic_cancels(self) -> bool:
        """Whether the row statistic's terms can have either sign (a plain sum of scores can
        cancel far below the scores; |scores|, scores^2, exp(scores) cannot): the kernel then
        sums it over every key chunk before it divides and rounds any weight."""
        if not self.row_term.eqns:
            return True
        last = self.row_term.eqns[-1]
        squares = last.primitive == "mul" and last.inputs[0] is last.inputs[1]
        even_power = last.primitive == "integer_pow" and last.params["y"] % 2 == 0
        return not (squares or even_power or last.primitive in ("abs", "exp", "square"))

    @property
    def carries_state(self) -> bool:
        """Whether one pass with a fixed-size carried state computes it: a cumulative decay
        (it factors across a chunk boundary) and rows that sum their plain scores (linear, so
        the earlier keys' share is q_i . z for a carried z; |scores| or scores^2 are not)."""
        return self.decay is DecayKind.CUMULATIVE and not self.row_term.eqns


def recognise_retention(program: Program) -> RetentionSpec:
    """The scan spec of the program, or CannotPlan saying what does not match."""
    dots = [eqn for eqn in program.eqns if eqn.primitive == "dot_general"]
    if len(dots) != 2:
        raise CannotPlan(f"not a decayed scan: {len(dots)} matmul(s), the quadratic form has two")
    first, second = dots
    producers = {o: eqn for eqn in program.eqns for o in eqn.outputs}
    if (
        _numbers(first) != _SCORES_NUMBERS
        or _numbers(second) != _VALUES_NUMBERS
        or not _depends_on(second.inputs[0], first, producers)
    ):
        raise CannotPlan("not a decayed scan: the matmuls are not Q K^T then the weights times V")
    query, key = (_input_of(program, producers, operand) for operand in first.inputs)
    value = _input_of(program, producers, second.inputs[1])
    if query is None or key is None or value is None or len({query, key, value}) != 3:
        raise CannotPlan("not a decayed scan: the matmuls do not read three distinct inputs")
    consumers = _consumers(program)
    decayed, matrix = _decayed_scores(first, consumers, producers)
    total, divide = _row_sum_and_division(decayed, consumers)
    row_term = _chain(decayed, total.inputs[0], producers)
    divided = divide.outputs[0]
    weights = _through(divided, consumers, ("convert_element_type",))
    if weights is not second.inputs[0] or divide.inputs[0] is not decayed:
        raise CannotPlan("a decayed scan whose weights are not its divided scores")
    result = _through(second.outputs[0], consumers, ("convert_element_type",))
    if len(program.outputs) != 1 or program.outputs[0] is not result:
        raise CannotPlan("a decayed scan with more than the weighted values as its result")
    divisor = _chain(total.outputs[0], divide.inputs[1], producers)
    heads = program.inputs[query].shape[:3]
    decay, vector = _decay_vector(matrix, producers, heads)
    return RetentionSpec(
        query,
        key,
        value,
        decay,
        vector,
        _prologue(program, vector, producers),
        row_term,
        divisor,
        np.dtype(weights.dtype),
        np.dtype(result.dtype),
    )


def _numbers(eqn: Eqn) -> tuple:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    return ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))


def _consumers(program: Program) -> dict[Var, list[Eqn]]:
    found: dict[Var, list[Eqn]] = {}
    for eqn in program.eqns:
        for operand in eqn.inputs:
            if isinstance(operand, Var):
                found.setdefault(operand, []).append(eqn)
    return found


def _only_consumer(var: Var, consumers: dict[Var, list[Eqn]]) -> Eqn | None:
    users = consumers.get(var, [])
    return users[0] if len(users) == 1 else None


def _through(var: Var, consumers: dict[Var, list[Eqn]], primitives: tuple[str, ...]) -> Var:
    """`var` followed through its single consumers while they are of `primitives`."""
    while (eqn := _only_consumer(var, consumers)) is not None and eqn.primitive in primitives:
        var = eqn.outputs[0]
    return var


def _decayed_scores(
    first: Eqn, consumers: dict[Var, list[Eqn]], producers: dict[Var, Eqn]
) -> tuple[Var, Var]:
    """The scores times the decay matrix, and the matrix: the first product of the scores
    with a value that Q K^T does not feed."""
    scores = _through(first.outputs[0], consumers, _PASS_THROUGH)
    product = _only_consumer(scores, consumers)
    if product is None or product.primitive != "mul":
        raise CannotPlan("not a decayed scan: the scores are not multiplied by a decay")
    matrix = next(o for o in product.inputs if o is not scores)
    if not isinstance(matrix, Var) or _depends_on(matrix, first, producers):
        raise CannotPlan("not a decayed scan: the scores are not multiplied by a decay matrix")
    return product.outputs[0], matrix


def _row_sum_and_division(decayed: Var, consumers: dict[Var, list[Eqn]]) -> tuple[Eqn, Eqn]:
    """The sum over keys of (an element-wise function of) the decayed scores, and the
    division of the decayed scores by what that sum becomes."""
    users = consumers.get(decayed, [])
    divides = [eqn for eqn in users if eqn.primitive == "div"]
    reached, pending, total = set(), [decayed], None
    while pending and total is None:
        var = pending.pop()
        for eqn in consumers.get(var, []):
            if eqn.primitive == "reduce_sum" and tuple(eqn.params["axes"]) == (3,):
                total = eqn
            elif (
                is_elementwise(eqn.primitive, len(eqn.inputs))
                and eqn.primitive != "div"
                and eqn.outputs[0] not in reached
            ):
                reached.add(eqn.outputs[0])
                pending.append(eqn.outputs[0])
    if total is None or len(divides) != 1:
        raise CannotPlan("not a decayed scan: its rows are not divided by a sum over the keys")
    return total, divides[0]


def _chain(start: Var, end: Operand, producers: dict[Var, Eqn]) -> Chain:
    """The element-wise equations (and views) from `start` to `end`; every other operand they
    read must be a constant."""
    eqns: list[Eqn] = []
    pending = [end]
    while pending:
        operand = pending.pop()
        if not isinstance(operand, Var) or operand is start or operand not in producers:
            if isinstance(operand, Var) and operand is not start:
                raise CannotPlan("a decayed scan whose row divisor reads another input")
            continue
        eqn = producers[operand]
        if not (is_elementwise(eqn.primitive, len(eqn.inputs)) or eqn.primitive in VIEWS):
            raise CannotPlan(f"a decayed scan whose row divisor uses `{eqn.primitive}`")
        if eqn not in eqns:
            eqns.append(eqn)
            pending.extend(eqn.inputs)
    order = {id(eqn): n for n, eqn in enumerate(producers.values())}
    return Chain(start, end, tuple(sorted(eqns, key=lambda e: order[id(e)])))


def _decay_vector(
    matrix: Var, producers: dict[Var, Eqn], heads: tuple[Any, ...]
) -> tuple[DecayKind, Var]:
    """The decay vector the matrix is built from: a cumulative log-decay c (batch, heads, seq)
    met as c_i - c_j, else a per-head log-rate r (heads,) multiplying the positions."""
    cone = _cone(matrix, producers)
    if "exp" not in {eqn.primitive for eqn in cone}:
        raise CannotPlan("not a decayed scan: its decay matrix is no exponential")
    for eqn in cone:
        sources = [_source(o, producers) for o in eqn.inputs]
        if (
            eqn.primitive == "sub"
            and sources[0] is sources[1]
            and isinstance(sources[0], Var)
            and sources[0].shape == heads
        ):
            return DecayKind.CUMULATIVE, sources[0]
    for eqn in cone:
        for source in (_source(o, producers) for o in eqn.inputs):
            if eqn.primitive == "mul" and isinstance(source, Var) and source.shape == heads[1:2]:
                return DecayKind.HEAD_RATE, source
    raise CannotPlan(
        "a decay matrix that is neither exp(rate_h * (i - j)) nor exp(c_i - c_j) of a vector"
    )


def _cone(var: Var, producers: dict[Var, Eqn]) -> list[Eqn]:
    """Every equation `var` depends on."""
    found: list[Eqn] = []
    pending: list[Any] = [var]
    while pending:
        operand = pending.pop()
        if isinstance(operand, Var) and operand in producers:
            eqn = producers[operand]
            if eqn not in found:
                found.append(eqn)
                pending.extend(eqn.inputs)
    return found


def _source(operand: Any, producers: dict[Var, Eqn]) -> Any:
    """What a view of a value (or a view of a view) is of."""
    while (
        isinstance(operand, Var) and operand in producers and producers[operand].primitive in VIEWS
    ):
        operand = producers[operand].inputs[0]
    return operand


def _prologue(program: Program, vector: Var, producers: dict[Var, Eqn]) -> tuple[Eqn, ...]:
    """The equations that make the decay vector, in program order; element-wise, views,
    positions and cumulative sums only."""
    cone = _cone(vector, producers)
    for eqn in cone:
        if not (
            is_elementwise(eqn.primitive, len(eqn.inputs)) or eqn.primitive in _PROLOGUE_PRIMITIVES
        ):
            raise CannotPlan(f"a decayed scan whose decay vector uses `{eqn.primitive}`")
    return tuple(eqn for eqn in program.eqns if eqn in cone)


def _depends_on(operand: Any, eqn: Eqn, producers: dict[Var, Eqn]) -> bool:
    return (
        any(found is eqn for found in _cone(operand, producers))
        if isinstance(operand, Var)
        else False
    )


def _input_of(program: Program, producers: dict[Var, Eqn], operand: Any) -> int | None:
    """The 4-D dynamic argument a matmul operand is a cast or view of, if it is one."""
    while (
        isinstance(operand, Var)
        and operand in producers
        and producers[operand].primitive in _PASS_THROUGH
    ):
        operand = producers[operand].inputs[0]
    for position, var in enumerate(program.inputs):
        if var is operand and len(var.shape) == 4:
            return position
    return None
