"""From the reference's program to a plan: stages, each one `pallas_call`.

A stage is a matmul (or none) and the element-wise and reduction equations that follow it on
the same 2-D frame (layout.py). Every matmul starts a stage; every other equation joins the
latest stage its operands come from when it fits that stage's frame, or starts an element-wise
stage of its own. Equations on parameters only (a bias reshaped, a variance plus eps) float
until a stage uses them and are then computed inside that stage. Values that cross stages go
through HBM. Reductions over a stage's columns make that stage span all columns in one block;
reductions over its rows (batch statistics, a mean over tokens) go to a column-reduction stage
that walks the rows innermost and accumulates in VMEM.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.image_reductions import reduces_whole_images
from maxkernel_tui.agents.builtin.image_statistics import per_image_statistics
from maxkernel_tui.agents.builtin.layout import (
    COL,
    GROUP_ROW,
    PERIODIC_COL,
    ROW,
    SCALAR,
    TILE,
    Frame,
    Kind,
    classify,
    join,
    product_of,
    same_layout,
)
from maxkernel_tui.agents.builtin.pixels_major import (
    PIXELS_MAJOR,
    PixelsMajorConvStage,
    pixels_major_program,
)
from maxkernel_tui.agents.builtin.primitives import (
    REDUCTIONS,
    VIEWS,
    is_elementwise,
    is_plain_conv,
    is_transposed_conv,
    picks_one_per_row,
)
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Program, Var
from maxkernel_tui.agents.builtin.running import RunningEpilogue, running_epilogue
from maxkernel_tui.agents.builtin.shared_rows import share_rows
from maxkernel_tui.agents.builtin.stages import (
    ColumnReductionStage,
    Conv,
    ConvStage,
    Matmul,
    MatmulStage,
    Stage,
    asked_precision,
)
from maxkernel_tui.agents.builtin.volume_stage import TransposedVolumeConvStage, VolumeConvStage


@dataclass
class Plan:
    program: Program
    stages: list[Stage]
    storage: dict[Var, Var]  # a free view (reshape) of a value -> the value that holds the data
    # Transposes XLA does between stages, in order: the next stage reads the result from HBM in
    # the layout its tiling wants (a matmul's batch and contraction axes where it expects them).
    relayouts: list[Eqn] = field(default_factory=list)
    # Matmul stages whose row-wise epilogue runs across column blocks with running statistics
    # (running.py) instead of on blocks of whole rows.
    running: dict[Stage, RunningEpilogue] = field(default_factory=dict)
    # Whether a convolution's batch statistics are summed per image first (image_statistics.py)
    per_image: bool = False

    @property
    def outputs(self) -> list[Var]:
        """The program's results (a plan exists only when none of them is a constant)."""
        return [o for o in self.program.outputs if isinstance(o, Var)]

    @property
    def family(self) -> str:
        if len(self.stages) > 1:
            return f"multi-stage ({'+'.join(s.label for s in self.stages)})"
        return self.stages[0].family


def plan_program(
    program: Program,
    split_rowwise: bool = False,
    share: bool = True,
    pixels_major: bool = True,
    per_image: bool = True,
) -> Plan:
    """The stages for `program`. A matmul whose epilogue reduces over its columns computes it in
    the same kernel: with running statistics across column blocks where its dataflow allows
    (running.py), else on blocks of whole rows. With `split_rowwise`, such a matmul becomes a
    plain tiled matmul and a row-wise stage: one more trip through HBM, but the weight is no
    longer re-read for every block of rows (better when the rows are wide and the epilogue
    needs them whole). `share`: matmuls of the same rows share one stage (shared_rows.py);
    `pixels_major`: a 2-D convolution writes its output in XLA's layout, and what follows it
    works in that frame, where the program allows (pixels_major.py); `per_image`: otherwise a
    convolution's batch statistics are summed per image in its own kernel first
    (image_statistics.py)."""
    if pixels_major and (relaid := pixels_major_program(program)) is not None:
        program = relaid
    elif per_image and (summed := per_image_statistics(program)) is not None:
        with contextlib.suppress(CannotPlan):  # else the sums as the reference writes them
            plan = plan_program(summed, split_rowwise, share, pixels_major=False, per_image=False)
            plan.per_image = True
            return plan
    if program.untranslatable is not None:
        raise CannotPlan(program.untranslatable)
    if program.constants:
        raise CannotPlan(
            "the reference captures a constant array; only scalar constants are supported"
        )
    fused = _Planner(program, frozenset(), share).plan()
    for stage in fused.stages:
        if isinstance(stage, MatmulStage) and (running := running_epilogue(stage)) is not None:
            fused.running[stage] = running
    split = frozenset(
        s.matmul.eqn
        for s in fused.stages
        if isinstance(s, MatmulStage) and s.full_cols and not s.batched
    )
    if not split_rowwise or not split:
        return fused
    return _Planner(program, split, share).plan()


# Values XLA lays out for the stage that reads them (no arithmetic): transposes, flips.
_RELAYOUTS = ("transpose", "rev")


class _Planner:
    def __init__(self, program: Program, split: frozenset[Eqn], share: bool) -> None:
        self.program = program
        self.split = split  # matmul equations whose epilogue goes to a stage of its own
        self.share = share  # matmuls of the same rows share one stage
        self.companions: dict[Eqn, Stage] = {}
        self.stages: list[Stage] = []
        self.stage_of: dict[Var, Stage] = {}
        self.producer: dict[Var, Eqn] = {}  # floating values: computed from parameters only
        self.storage: dict[Var, Var] = {}
        self.relayouts: list[Eqn] = []
        self.relaid: set[Var] = set()  # values a relayout produces: read from HBM like inputs
        self.readers: dict[Var, list[Eqn]] = {}  # the equations that read each value
        for eqn in program.eqns:
            for operand in eqn.inputs:
                if isinstance(operand, Var):
                    self.readers.setdefault(operand, []).append(eqn)

    def plan(self) -> Plan:
        if any(eqn.primitive == "iota" for eqn in self.program.eqns):
            raise CannotPlan(
                "the reference builds position masks (iota); only the attention kernel rebuilds "
                "those, and this is not attention"
            )
        for eqn in self.program.eqns:
            self._visit(eqn)
        for output in self.program.outputs:
            if isinstance(output, Literal):
                raise CannotPlan("the reference returns a constant")
            self._materialize(output)
        if self.share:
            share_rows(self.stages, self.program, self.stage_of, self.relaid, self.split)
        self._connect()
        for stage in self.stages:
            if isinstance(stage, VolumeConvStage) and stage.whole_volume:
                stage.check_whole_volume_fits()
            elif isinstance(stage, VolumeConvStage):
                stage.check_per_plane()
        if not any(stage.head or stage.full_cols or stage.eqns for stage in self.stages):
            raise CannotPlan("the reference does no work a kernel could take over")
        return Plan(self.program, self.stages, self.storage, self.relayouts)

    # -- placing equations -------------------------------------------------------------------
    def _visit(self, eqn: Eqn) -> None:
        if eqn.primitive == "dot_general":
            self._matmul_stage(eqn)
            return
        if eqn.primitive == "conv_general_dilated":
            self._conv_stage(eqn)
            return
        if eqn.primitive == "reshape" and self._only_relaid_results(eqn.outputs[0]):
            self.producer[eqn.outputs[0]] = eqn  # a view of what it reshapes, for XLA's transpose
            return
        if eqn.primitive in _RELAYOUTS:
            # Floats until used: a matmul reads a transposed weight as it is stored; anything
            # else gets the transpose (or flip) done by XLA (a relayout) before the stage that
            # reads it.
            self.producer[eqn.outputs[0]] = eqn
            return
        sources = [
            self.stage_of[v] for v in eqn.inputs if isinstance(v, Var) and v in self.stage_of
        ]
        if not sources:
            for output in eqn.outputs:
                self.producer[output] = eqn
            return
        stage = max(sources, key=lambda s: s.number)
        if isinstance(stage, MatmulStage) and stage.matmul.eqn in self.split:
            stage = self._companion(stage)
        if not self._fits(eqn, stage):
            if eqn.primitive in REDUCTIONS:
                stage = self._column_reduction_stage(eqn, stage)
                if not self._fits(eqn, stage):
                    raise CannotPlan(
                        f"`{eqn.primitive}` over {_shapes(eqn)} reduces in a way no tiling of its "
                        "rows and columns holds"
                    )
                self._place(eqn, stage)
                return
            over_images = Stage(len(self.stages) + 1, stage.frame)  # a convolution's frame
            if stage.batched and self._fits(eqn, over_images):
                stage = self._add(over_images)
                self._place(eqn, stage)
                return
            stage = self._add(Stage(len(self.stages) + 1, Frame.of(eqn.outputs[0].shape)))
            if not self._fits(eqn, stage):
                raise CannotPlan(
                    f"`{eqn.primitive}` mixes values that no 2-D tiling holds together "
                    f"({_shapes(eqn)})"
                )
        self._place(eqn, stage)

    def _place(self, eqn: Eqn, stage: Stage) -> None:
        for operand in eqn.inputs:
            if isinstance(operand, Var) and operand in self.producer and operand not in stage.kinds:
                if self._relaid_later(operand):
                    self._materialize(operand)
                else:
                    self._place(self.producer[operand], stage)
        for operand in eqn.inputs:
            if isinstance(operand, Var) and operand not in stage.kinds:
                _classify_into(stage, operand)
        for output in eqn.outputs:
            _classify_into(stage, output)
            self.stage_of[output] = stage
        stage.eqns.append(eqn)

    def _fits(self, eqn: Eqn, stage: Stage) -> bool:
        """Whether the equation can run inside `stage`: every operand has a kind there, and the
        operation maps those kinds onto the kind of its result."""
        found = [self._kind_in(o, stage) for o in eqn.inputs]
        operands = [k for k in found if k is not None]
        result = classify(eqn.outputs[0].shape, stage.frame)
        if result is None or len(operands) != len(found) or len(eqn.outputs) != 1:
            return False
        source = operands[0]
        if PERIODIC_COL in {k.name for k in (*operands, result)} and (
            not isinstance(stage, ConvStage) or eqn.primitive in REDUCTIONS
        ):
            return False  # periodic columns: a convolution's pixels, read (never reduced) there
        if eqn.primitive in REDUCTIONS and not eqn.reduces_unit_axes_only:
            if stage.reduces_rows:
                return reduces_rows(source, result) or reduces_images(source, result)
            if isinstance(stage, ConvStage) and reduces_whole_images(eqn, source, result):
                return True
            return _reduction_allowed(eqn.primitive, source, result)
        if stage.reduces_rows and not finished(stage, result):
            return False  # a column-reduction stage yields only what is left once rows are reduced
        if is_elementwise(eqn.primitive, len(eqn.inputs)):
            joined = join(operands)
            return joined is not None and same_layout(joined, result)
        if eqn.primitive in REDUCTIONS:
            return same_layout(source, result)
        if eqn.primitive in VIEWS:
            return _view_allowed(source, result)
        if picks_one_per_row(eqn.primitive, eqn.params):
            return (
                [k.name for k in operands] == [TILE, ROW]
                and result.name == ROW
                and not stage.batched
            )
        return False

    def _kind_in(self, operand: Operand, stage: Stage) -> Kind | None:
        if isinstance(operand, Literal):
            return Kind(SCALAR)
        if operand in stage.kinds:
            return stage.kinds[operand]
        if (
            operand in self.producer
            and not self._relaid_later(operand)
            and not self._fits(self.producer[operand], stage)
        ):
            return None
        return classify(operand.shape, stage.frame)

    def _only_relaid_results(self, var: Var) -> bool:
        """Whether `var` is read only by transposes or flips whose results are the program's."""
        readers = self.readers.get(var, [])
        return bool(readers) and all(
            r.primitive in _RELAYOUTS and all(o in self.program.outputs for o in r.outputs)
            for r in readers
        )

    def _relaid_later(self, var: Var) -> bool:
        return self.producer[var].primitive in _RELAYOUTS

    # -- matmuls -----------------------------------------------------------------------------
    def _matmul_stage(self, eqn: Eqn) -> None:
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.inputs
        if not isinstance(lhs, Var) or not isinstance(rhs, Var):
            raise CannotPlan("a matmul with a constant operand")
        batch = len(lhs_batch)
        lhs_free = [
            a for a in range(len(lhs.shape)) if a not in lhs_batch and a not in lhs_contract
        ]
        rhs_free = [
            a for a in range(len(rhs.shape)) if a not in rhs_batch and a not in rhs_contract
        ]
        if len(lhs_contract) != 1 or len(rhs_free) != 1 or not lhs_free:
            raise CannotPlan(
                "a matmul that is not (batch..., rows..., depth) x (batch..., depth, cols) up to "
                f"transposes: dimension numbers {eqn.params['dimension_numbers']}"
            )
        # The kernel reads (batch..., rows..., depth) and (batch..., depth, cols) or (batch...,
        # cols, depth); other axis orders are laid out that way by XLA first.
        lhs_order = (*lhs_batch, *lhs_free, *lhs_contract)
        if lhs_order != tuple(range(len(lhs.shape))):
            lhs = self._transposed(lhs, lhs_order)
        transposed = tuple(rhs_batch) + (rhs_free[0], rhs_contract[0]) == tuple(
            range(len(rhs.shape))
        )
        if not transposed and tuple(rhs_batch) + (rhs_contract[0], rhs_free[0]) != tuple(
            range(len(rhs.shape))
        ):
            rhs, transposed = (
                self._transposed(rhs, (*rhs_batch, rhs_free[0], rhs_contract[0])),
                True,
            )
        if not batch and rhs in self.producer and self.producer[rhs].primitive == "transpose":
            rhs, transposed = self.producer[rhs].source, not transposed
        out = eqn.outputs[0]
        frame = Frame(
            tuple(out.shape[:batch]),
            tuple(d for d in out.shape[batch:-1] if not d.is_one()),
            out.shape[-1],
        )
        # The operands are read from HBM: a view resolves to the value holding the data, anything
        # else computed from parameters becomes a stage of its own.
        self._materialize(lhs)
        self._materialize(rhs)
        matmul = Matmul(eqn, lhs, rhs, transposed, lhs.shape[-1], asked_precision(eqn))
        stage = self._add(MatmulStage(len(self.stages) + 1, frame, matmul=matmul))
        stage.kinds[out] = Kind(TILE, batched=bool(batch))
        self.stage_of[out] = stage

    def _conv_stage(self, eqn: Eqn) -> None:
        """A convolution heads a stage whose frame is (batch,) x (out channels,) x (pixels): the
        epilogue sees per-channel values (a bias (C, 1, 1)) as rows, whole images as grouped
        tiles. A transposed 3-D convolution's kernel, in whatever axis order and flipped or
        not, is laid out as its taps (OIDHW) by XLA first."""
        image, kernel = eqn.inputs
        out = eqn.outputs[0]
        transposed = is_transposed_conv(eqn.params)
        if (
            not (is_plain_conv(eqn.params) or transposed)
            or not isinstance(image, Var)
            or not isinstance(kernel, Var)
            or any(d.is_one() for d in out.shape[:2])
        ):
            raise CannotPlan(
                f"a convolution other than 2-D NCHW x OIHW or 3-D NCDHW x OIDHW, stride 1, no "
                f"padding or dilation, one group, or a transposed 3-D NCDHW convolution "
                f"({_shapes(eqn)})"
            )
        order = tuple(eqn.params["dimension_numbers"].rhs_spec)
        if transposed and order != tuple(range(len(order))):
            kernel = self._transposed(kernel, order)
        if eqn.params.get(PIXELS_MAJOR):  # (pixels * batch, out channels): a matmul's frame
            self._materialize(image)
            self._materialize(kernel)
            frame = Frame((), (out.shape[0],), out.shape[1])
            stage = self._add(
                PixelsMajorConvStage(len(self.stages) + 1, frame, conv=Conv(eqn, image, kernel))
            )
            stage.kinds[out] = Kind(TILE)
            self.stage_of[out] = stage
            return
        batch, channels, *spatial = out.shape
        frame = Frame((batch,), (channels,), product_of(spatial))
        self._materialize(image)
        self._materialize(kernel)
        # a volume: one plane a step
        kind = (
            TransposedVolumeConvStage
            if transposed
            else ConvStage
            if len(spatial) == 2
            else VolumeConvStage
        )
        stage = self._add(kind(len(self.stages) + 1, frame, conv=Conv(eqn, image, kernel)))
        stage.kinds[out] = Kind(TILE, spatial[-1], batched=True)
        self.stage_of[out] = stage

    def _transposed(self, var: Var, order: tuple[int, ...]) -> Var:
        """A value standing for `var` with its axes in `order`, produced by a transpose."""
        result = Var(
            tuple(var.shape[a] for a in order), var.dtype, tuple(var.bench_shape[a] for a in order)
        )
        self.producer[result] = Eqn("transpose", [var], [result], {"permutation": order})
        return result

    def _view_root(self, var: Var) -> Var:
        while var in self.producer and self.producer[var].primitive in (
            "reshape",
            "squeeze",
            "expand_dims",
        ):
            var = self.producer[var].source
        return var

    # -- stages and their operands -----------------------------------------------------------
    def _companion(self, matmul_stage: MatmulStage) -> Stage:
        """The row-wise stage that takes over the epilogue of a split matmul stage."""
        key = matmul_stage.matmul.eqn
        if key not in self.companions:
            self.companions[key] = self._add(Stage(len(self.stages) + 1, matmul_stage.frame))
        return self.companions[key]

    def _column_reduction_stage(self, eqn: Eqn, source: Stage) -> Stage:
        """The stage for a reduction over rows that `source` cannot hold. When `source` is an
        element-wise stage whose values feed only itself and this reduction, it becomes that
        stage: its tiles are reduced where they are made instead of going through HBM (a
        variance's squared deviations). Else a new column-reduction stage."""
        if self._feeds_only(source, eqn):
            merged = ColumnReductionStage(
                source.number, source.frame, list(source.eqns), dict(source.kinds)
            )
            if self._fits(eqn, merged):
                self.stages[self.stages.index(source)] = merged
                for var, owner in self.stage_of.items():
                    if owner is source:
                        self.stage_of[var] = merged
                return merged
        return self._add(ColumnReductionStage(len(self.stages) + 1, source.frame))

    def _feeds_only(self, source: Stage, eqn: Eqn) -> bool:
        """Whether `source` is a plain element-wise stage (no head, no reduction across its
        columns, not a split matmul's epilogue) whose every computed value is read only by its
        own equations or by `eqn`, and is not a result of the program. (A stage over a
        convolution's images spans their columns anyway, as does the reduction's.)"""
        across_columns = source.full_cols and not source.batched
        if type(source) is not Stage or across_columns or not source.eqns:
            return False
        if any(source is companion for companion in self.companions.values()):
            return False
        own = {id(e) for e in source.eqns} | {id(eqn)}
        made = [o for e in source.eqns for o in e.outputs if o not in self.producer]
        return all(
            all(id(reader) in own for reader in self.readers.get(var, []))
            and all(var is not out for out in self.program.outputs)
            for var in made
        )

    def _add(self, stage: Stage) -> Stage:
        self.stages.append(stage)
        return stage

    def _materialize(self, var: Var) -> None:
        """Make sure `var` is computed by some stage (values from parameters get their own)."""
        if (
            var in self.stage_of
            or var in self.program.inputs
            or var in self.storage
            or var in self.relaid
        ):
            return
        root = self._view_root(var)
        if root is not var:
            self.storage[var] = root
            self._materialize(root)
            return
        if var not in self.producer:
            raise CannotPlan("a value of the reference comes from nowhere the agent can follow")
        if self._relaid_later(var):
            transpose = self.producer.pop(var)
            self._materialize(transpose.source)
            self.relayouts.append(transpose)
            self.relaid.add(var)
            return
        stage = self._add(Stage(len(self.stages) + 1, Frame.of(var.shape)))
        producer = self.producer.pop(var)
        if not self._fits(producer, stage):
            raise CannotPlan(
                f"`{producer.primitive}` on parameters ({_shapes(producer)}) fits no tiling"
            )
        self._place(producer, stage)

    def _connect(self) -> None:
        """Stage inputs and outputs: whatever crosses a stage boundary goes through HBM."""
        needed_later: dict[Var, Var] = {o: o for o in self.program.outputs if isinstance(o, Var)}
        for stage in self.stages:
            produced = {o for e in stage.eqns for o in e.outputs}
            produced.update(head.result for head in stage.heads)
            operands = [
                o for e in stage.eqns for o in e.inputs if isinstance(o, Var) and o not in produced
            ]
            for var in operands:
                if all(var is not seen for seen in stage.inputs):
                    stage.inputs.append(var)
            for var in stage.inputs + stage.reads:
                root = self.storage.get(var, var)
                needed_later[root] = root
        for transpose in self.relayouts:
            root = self.storage.get(transpose.source, transpose.source)
            needed_later[root] = root
        for stage in self.stages:
            stage.outputs = [
                v for key, v in needed_later.items() if self.stage_of.get(key) is stage
            ]
            for var in stage.outputs:
                kind = stage.kinds[var]  # every result a stage computes has a kind there
                whole_images = isinstance(stage, ConvStage) and stage.full_rows
                wrong = not finished(stage, kind) if stage.reduces_rows else not kind.spans_rows
                if wrong and not whole_images:
                    raise CannotPlan(
                        f"a {kind.name} result of shape {_shape(var)} would need every row of a "
                        "row-tiled stage: not planned"
                    )
                if kind.name == GROUP_ROW:
                    raise CannotPlan(
                        f"a per-group result of shape {_shape(var)} leaves the kernel: not planned"
                    )
        for stage in self.stages:
            for var in stage.inputs:
                held = stage.kinds.get(var)
                if held is None or held.name == GROUP_ROW:
                    raise CannotPlan(
                        f"a stage input of shape {_shape(var)} does not fit the stage's tiling"
                    )


def _classify_into(stage: Stage, var: Var) -> None:
    """Note the kind of `var` in `stage`; one that fits no kind there is caught when the stages
    are connected (a stage input without a kind does not fit its tiling)."""
    kind = classify(var.shape, stage.frame)
    if kind is not None:
        stage.kinds[var] = kind


def reduces_rows(source: Kind, result: Kind) -> bool:
    """A reduction over the rows of a frame: tiles to columns, rows to a scalar."""
    unbatched = not source.batched and not result.batched
    return unbatched and (source.name, result.name) in ((TILE, COL), (ROW, SCALAR))


def reduces_images(source: Kind, result: Kind) -> bool:
    """A reduction over the images (and columns) of a convolution's frame: per-image tiles or
    rows to one value per row (batch statistics per channel, or their per-image sums)."""
    per_row = source.name in (TILE, ROW) and result.name == ROW
    return source.batched and not result.batched and per_row


def finished(stage: Stage, kind: Kind) -> bool:
    """Whether a column-reduction stage can yield a value of this kind: what is left once rows
    are reduced (columns, scalars), or once images are (anything shared by every image)."""
    return not kind.batched if stage.batched else not kind.spans_rows


def _reduction_allowed(primitive: str, source: Kind, result: Kind) -> bool:
    """Reductions a row-tiled kernel can do inside one block of full rows."""
    if source.batched != result.batched:
        return False
    if source.name == TILE and result.name == GROUP_ROW:
        return primitive == "reduce_sum" and source.width == result.width
    return (source.name, result.name) in ((TILE, ROW), (GROUP_ROW, ROW), (COL, SCALAR))


def _view_allowed(source: Kind, result: Kind) -> bool:
    """Reshapes and broadcasts that keep the kernel's 2-D layout, or broadcast a smaller kind."""
    if same_layout(source, result):
        return True
    joined = join([source, result])
    return joined is not None and same_layout(joined, result)


def _shape(var: Var) -> str:
    return "(" + ", ".join(str(d) for d in var.bench_shape) + ")"


def _shapes(eqn: Eqn) -> str:
    return ", ".join(_shape(v) if isinstance(v, Var) else "constant" for v in eqn.inputs)
