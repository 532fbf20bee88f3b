"""Verdicts earned at production shapes: defences against a kernel that is exact on the small
shapes the numerics run and does something else at the shapes it will run at. No jax here:
evaluation/work/kernel_work.py measures the programs, this module judges them.

These are rules on the shape of the program: fast, readable feedback. What judges a kernel at
production shapes is running it there: sampled output tiles in TPU interpret mode
(evaluation/tiles/sampled_run.py, the `tiles` check), and on a TPU the device numerics.
  - work: the kernel's matmul flops at production shapes (inside Pallas and left to XLA) against
    what the reference needs there: at least WORK_SHARE_FLOOR of the reference's matmul flops.
    Padding only adds flops, so it is never a deficit; flops under a `cond` (`pl.when`) are
    counted at their most expensive branch and said to be conditional (whether the branch runs
    is what the tiles check finds out). A kernel without matmuls never passes against a
    reference that has them;
  - coverage: the output blocks the grid visits must cover every output at production shapes
    when they covered it at check shapes (no part left to stale memory);
  - bodies: the production kernel bodies use every kind of arithmetic the checked bodies used,
    with the same matmul operand types (no cheaper body above a size);
  - numerics: production shapes run in TPU interpret mode when that is affordable, and always
    on a TPU; the numerics check then compares them with the reference.
A defence that cannot judge (data-dependent work, no matmuls) says why instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from maxkernel_tui.kernels.report.checks import FAIL, PASS, Check
from maxkernel_tui.kernels.report.reasons import (
    Bodies,
    Coverage,
    Defence,
    DefenceName,
    DefenceOutcome,
    Defences,
    Finding,
    MatmulWork,
    Misfit,
    ProductionSize,
    Reason,
)
from maxkernel_tui.kernels.report.status import CheckName

WORK, COVERAGE, BODIES, NUMERICS = DefenceName
PASSED, FAILED, NOT_APPLICABLE, SCHEDULED, SAMPLED = DefenceOutcome

# The least share of the reference's matmul flops a kernel does at production shapes: a little
# slack for work the reference does and a kernel may fold away (an algebraic shortcut).
WORK_SHARE_FLOOR = 0.9
# Production shapes run in interpret mode only below these: the reference's flops and the
# kernels' grid steps (interpretation costs about a millisecond per step).
AFFORDABLE_FLOPS = 2e9
AFFORDABLE_STEPS = 2048
AFFORDABLE_BYTES = 64 * 2**20  # the inputs
CHECK_NAME = CheckName.PRODUCTION
# The most matmul flops the reference may need at production shapes for the tiles check: it is
# computed once per task and seed by XLA on the CPU and cached (a 4096x8192x8192 f32 GEMM, 5.5e11
# flops, took 10 s here; 8p's bf16 8192x8192x28672, 3.9e12, about 150 s).
REFERENCE_FLOPS_BUDGET = 4e12
# The operations that do a body's arithmetic, which a cheaper body would drop. Masking and index
# bookkeeping (iota, compares, selects, casts) are left out: an honest kernel masks a ragged
# last block on check shapes and skips that on production shapes that divide evenly.
COMPUTE_OPERATIONS = frozenset(
    {
        "dot_general",
        "reduce_sum",
        "reduce_max",
        "reduce_min",
        "cumsum",
        "exp",
        "exp2",
        "log",
        "log1p",
        "tanh",
        "logistic",
        "rsqrt",
        "sqrt",
        "erf",
        "pow",
        "sin",
        "cos",
        "div",
    }
)


@dataclass(frozen=True)
class KernelWork:
    """One pallas_call at one set of shapes (evaluation/work/kernel_work.py measures it)."""

    name: str
    steps: int
    mxu_flops: float  # over the whole grid; an upper bound across pl.when branches
    conditional_flops: float  # the part of mxu_flops under a cond / pl.when branch
    exact: bool  # False when the work depends on data (while loops, scalar prefetch)
    operations: list[str]  # primitive names used by the body
    matmul_types: list[str]  # "bfloat16 x bfloat16 -> float32" per kind of matmul
    output_coverage: float | None  # least share of an output its blocks write; None: unknown
    # (block shape, array shape) of each output, in the kernel's order of outputs
    output_blocks: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class ProgramWork:
    kernels: list[KernelWork]
    xla_flops: float  # matmul/conv flops outside Pallas

    @property
    def flops(self) -> float:
        return sum(k.mxu_flops for k in self.kernels) + self.xla_flops

    @property
    def conditional_flops(self) -> float:
        return sum(k.conditional_flops for k in self.kernels)

    @property
    def exact(self) -> bool:
        return all(k.exact for k in self.kernels)

    @property
    def steps(self) -> int:
        return sum(k.steps for k in self.kernels)

    @property
    def coverage(self) -> float | None:
        """The least covered output of any kernel; None when one kernel's is unknown."""
        known = [k.output_coverage for k in self.kernels if k.output_coverage is not None]
        return min(known, default=1.0) if len(known) == len(self.kernels) else None

    @property
    def operations(self) -> set[str]:
        return {op for k in self.kernels for op in k.operations}

    @property
    def matmul_types(self) -> set[str]:
        return {t for k in self.kernels for t in k.matmul_types}


@dataclass(frozen=True)
class Shapes:
    """The candidate and the reference measured at one configuration."""

    config: str
    candidate: ProgramWork
    reference_flops: float  # matmul/conv flops of the reference program
    input_bytes: int


@dataclass
class ProductionFindings:
    defences: list[Defence] = field(default_factory=list)

    @property
    def failure(self) -> Defence | None:
        return next((d for d in self.defences if d.outcome == FAILED), None)

    def to_check(self, seconds: float) -> Check:
        # a failure's words name every failed defence: each is a separate thing to mend
        figures = Defences(tuple(self.defences))
        if self.failure is not None:
            return Check(CHECK_NAME, FAIL, Reason.DEFENCES_BROKEN, figures, round(seconds, 3))
        return Check(CHECK_NAME, PASS, Reason.DEFENCES_HELD, figures, round(seconds, 3))


def judge(
    production: Shapes, checked: Shapes, *, on_tpu: bool, tiles: bool = False
) -> ProductionFindings:
    """Every defence; coverage and bodies compare production shapes with the checked ones.
    `tiles`: sampled production tiles will run (evaluation/tiles/sampled_run.py)."""
    return ProductionFindings(
        [
            work_defence(production),
            coverage_defence(production.candidate, checked.candidate),
            bodies_defence(production.candidate, checked.candidate),
            numerics_defence(production, on_tpu=on_tpu, tiles=tiles),
        ]
    )


def work_defence(production: Shapes) -> Defence:
    """The kernel's matmul flops at production shapes against the reference's need there."""
    needed, done = production.reference_flops, production.candidate.flops
    if needed <= 0:
        return Defence(WORK, NOT_APPLICABLE, Finding.NO_REFERENCE_WORK)
    work = MatmulWork(
        production.config, done, needed, production.candidate.conditional_flops, WORK_SHARE_FLOOR
    )
    if done <= 0:
        return Defence(WORK, FAILED, Finding.NO_KERNEL_WORK, work)
    if not production.candidate.exact:
        return Defence(WORK, NOT_APPLICABLE, Finding.DATA_DEPENDENT_WORK, work)
    if done / needed < WORK_SHARE_FLOOR:
        return Defence(WORK, FAILED, Finding.TOO_LITTLE_WORK, work)
    return Defence(WORK, PASSED, Finding.ENOUGH_WORK, work)


def coverage_defence(production: ProgramWork, checked: ProgramWork) -> Defence:
    covered, covered_checked = production.coverage, checked.coverage
    if covered is None or covered_checked is None:
        return Defence(COVERAGE, NOT_APPLICABLE, Finding.COVERAGE_UNKNOWN)
    if covered < covered_checked:
        return Defence(
            COVERAGE, FAILED, Finding.COVERAGE_SHRINKS, Coverage(covered, covered_checked)
        )
    return Defence(COVERAGE, PASSED, Finding.COVERED, Coverage(covered, covered_checked))


def bodies_defence(production: ProgramWork, checked: ProgramWork) -> Defence:
    if not production.kernels or not checked.kernels:
        return Defence(BODIES, NOT_APPLICABLE, Finding.NO_KERNELS)
    kernels = (len(production.kernels), len(checked.kernels))
    missing = sorted((checked.operations - production.operations) & COMPUTE_OPERATIONS)
    if missing:
        return Defence(BODIES, FAILED, Finding.OPERATIONS_DROPPED, Bodies(*kernels, tuple(missing)))
    if production.matmul_types != checked.matmul_types:
        types = (tuple(sorted(production.matmul_types)), tuple(sorted(checked.matmul_types)))
        return Defence(BODIES, FAILED, Finding.MATMUL_TYPES_CHANGED, Bodies(*kernels, (), *types))
    return Defence(BODIES, PASSED, Finding.SAME_BODIES, Bodies(*kernels))


def tiles_misfit(production: ProgramWork, derived: ProgramWork) -> Misfit | None:
    """Why a derived configuration's program cannot run the kernel's own tiling, or None where
    it can: its grid covers less of an output than the production grid does (the coverage
    rule's measure) because an output block is larger than its axis there or does not divide
    it (fixed tiles above a derived size: no block written, a grid of zero steps), while the
    production grid covers every output. Such a configuration's outputs say nothing about the
    kernel, only about the derivation."""
    # a production grid that leaves memory unwritten is for the numerics to judge everywhere
    if production.coverage != 1.0 or derived.coverage is None or derived.coverage >= 1.0:
        return None
    uncovered = [k for k in derived.kernels if (k.output_coverage or 0.0) < 1.0]
    return _misfit(uncovered, lambda length: length)


def mapped_misfit(production: ProgramWork, sizes: dict[int, int]) -> Misfit | None:
    """Where the tracer has no program at a derived configuration (the kernel refused to be
    traced there, as a tiling that checks its divisibility does): the production program's
    output blocks against its outputs' sizes at that configuration, each production size taken
    to the size the derivation moves it to (`sizes`, where that is one size). None where every
    block fits, or the production grid leaves memory unwritten (numerics judge that)."""
    if production.coverage != 1.0:
        return None
    return _misfit(production.kernels, lambda length: sizes.get(length, length))


def _misfit(kernels: list[KernelWork], derived: Callable[[int], int]) -> Misfit | None:
    """The first output block larger than its axis at the derived configuration, or not
    dividing it; `derived` gives an axis's size there from its size in the kernel's program."""
    for kernel in kernels:
        for number, (block, array) in enumerate(kernel.output_blocks):
            for axis, (size, length) in enumerate(zip(block, array, strict=False)):
                there = derived(length)
                if size > there or there % max(size, 1):
                    return Misfit(kernel.name, number, axis, size, there)
    return None


def numerics_defence(production: Shapes, *, on_tpu: bool, tiles: bool = False) -> Defence:
    if on_tpu:
        return Defence(NUMERICS, SCHEDULED, Finding.RUN_ON_TPU)
    if affordable(production):
        return Defence(NUMERICS, SCHEDULED, Finding.RUN_INTERPRETED)
    if tiles:
        return Defence(NUMERICS, SAMPLED, Finding.TILES_TO_RUN)
    size = ProductionSize(
        production.reference_flops,
        production.candidate.steps,
        production.input_bytes,
        AFFORDABLE_FLOPS,
        AFFORDABLE_STEPS,
        AFFORDABLE_BYTES,
    )
    return Defence(NUMERICS, NOT_APPLICABLE, Finding.TOO_LARGE_TO_RUN, size)


def affordable(production: Shapes) -> bool:
    return (
        production.reference_flops <= AFFORDABLE_FLOPS
        and production.candidate.steps <= AFFORDABLE_STEPS
        and production.input_bytes <= AFFORDABLE_BYTES
    )
