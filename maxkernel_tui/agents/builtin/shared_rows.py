"""Matmuls of the same rows by several weights in one stage: a matmul of the same rows as an
earlier one, by another weight, joins the earlier one's stage as a sibling (stages.MatmulStage).
The rows are read from HBM once for all of them, and what combines their products (a gate, a
SwiGLU's product) runs in the one epilogue instead of a second kernel reading the first's result
back. No jax here."""

from __future__ import annotations

import numpy as np

from maxkernel_tui.agents.builtin.program import Eqn, Program, Var
from maxkernel_tui.agents.builtin.stages import Matmul, MatmulStage, Stage

_MXU = ("dot_general", "conv_general_dilated")


def share_rows(
    stages: list[Stage],
    program: Program,
    stage_of: dict[Var, Stage],
    relaid: set[Var],
    split: frozenset[Eqn],
) -> None:
    """Merge each matmul stage that can join an earlier one into it (in place), then number the
    stages again. `stage_of`: the stage computing each value, updated; `relaid`: values XLA
    lays out between stages; `split`: matmul equations whose epilogue has a stage of its own."""
    position = {id(e): n for n, e in enumerate(program.eqns)}  # each equation's, in order
    for later in list(stages):
        if not isinstance(later, MatmulStage):
            continue
        first = next(
            (s for s in stages if _siblings(s, later, program, position, stage_of, relaid, split)),
            None,
        )
        if first is None:
            continue
        assert isinstance(first, MatmulStage)
        first.siblings += [later.matmul, *later.siblings]
        first.eqns += later.eqns
        first.kinds.update(later.kinds)
        for var, owner in stage_of.items():
            if owner is later:
                stage_of[var] = first
        stages.remove(later)
    for number, stage in enumerate(stages, 1):
        stage.number = number


def _siblings(
    first: Stage,
    later: MatmulStage,
    program: Program,
    position: dict[int, int],
    stage_of: dict[Var, Stage],
    relaid: set[Var],
    split: frozenset[Eqn],
) -> bool:
    """Whether `later`'s matmul can join `first`'s stage: plain (unbatched, no reduction across
    columns, not split) stages over the same frame; the same rows, depth and weight layout;
    narrow operands (bf16: one MXU pass whatever the precision choice, so the stage's one
    `operands` serves every matmul); its weight a parameter; no other matmul or convolution
    between them in the program (the plan keeps their order, which the precision choice counts
    on); and every value its epilogue reads made by `first` or before it."""
    if type(first) is not MatmulStage or first.number >= later.number:
        return False
    if first.batched or later.batched or first.full_cols or later.full_cols:
        return False
    last, matmul = first.heads[-1], later.matmul
    assert isinstance(last, Matmul)
    same_rows = first.frame == later.frame and first.matmul.lhs is matmul.lhs
    if not same_rows or last.rhs_transposed != matmul.rhs_transposed or last.depth != matmul.depth:
        return False
    if any(m.eqn in split for m in (first.matmul, matmul)) or matmul.precision:
        return False
    narrow = all(
        np.dtype(m.lhs.dtype).itemsize <= 2 and np.dtype(m.rhs.dtype).itemsize <= 2
        for m in (*first.heads, matmul)
    )
    if not narrow or matmul.rhs not in program.inputs:
        return False
    between = program.eqns[position[id(last.eqn)] + 1 : position[id(matmul.eqn)]]
    if any(e.primitive in _MXU for e in between):
        return False
    return _reads_only_earlier(first, later, stage_of, relaid)


def _reads_only_earlier(
    first: Stage, later: MatmulStage, stage_of: dict[Var, Stage], relaid: set[Var]
) -> bool:
    """Whether every value `later`'s epilogue reads, besides its own, is made by `first`, by a
    stage before it, or comes from the program's inputs (not relaid by XLA between stages)."""
    made_here = {o for e in later.eqns for o in e.outputs} | {later.matmul.result}
    for eqn in later.eqns:
        for operand in eqn.inputs:
            if not isinstance(operand, Var) or operand in made_here:
                continue
            if operand in relaid:
                return False
            owner = stage_of.get(operand)
            if owner is not None and owner is not first and owner.number >= first.number:
                return False
    return True
