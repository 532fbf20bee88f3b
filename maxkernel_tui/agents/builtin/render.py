"""A plan -> the complete, self-contained source of a candidate kernel file.

The file declares its tunables at the top and carries, copied as written, the parameterised
stage of each family its plan uses (pieces/: matmul, row-wise and column reduction,
convolution), which pick every block size from the shapes they are called with (so the file
runs at bench, check and unseen shapes alike). What is written for the task: one function per
stage, its body or its head's epilogue translated from the reference's jaxpr (epilogue.py), and
`computation`, which reshapes operands to the stages' 2-D forms (free in XLA) and calls each
stage's piece with the stage's parameters.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.epilogue import (
    GROUP_HELPER,
    ROW_GROUP_HELPER,
    emit_body,
    head_sums,
)
from maxkernel_tui.agents.builtin.layout import (
    COL,
    PERIODIC_COL,
    ROW,
    SCALAR,
    TILE,
    Kind,
    product_of,
)
from maxkernel_tui.agents.builtin.operand_precision import (
    OperandPrecision,
    PrecisionChoice,
    operand_words,
)
from maxkernel_tui.agents.builtin.pixels_major import PixelsMajorConvStage
from maxkernel_tui.agents.builtin.planner import Plan
from maxkernel_tui.agents.builtin.primitives import dtype_source
from maxkernel_tui.agents.builtin.program import Var
from maxkernel_tui.agents.builtin.running_body import emit_running_body
from maxkernel_tui.agents.builtin.stages import (
    ColumnReductionStage,
    ConvStage,
    MatmulStage,
    OperandRole,
    Stage,
    mxu_heads,
)
from maxkernel_tui.agents.builtin.tunables import Tunables
from maxkernel_tui.agents.builtin.volume_stage import TransposedVolumeConvStage, VolumeConvStage

_ROLE = {
    TILE: OperandRole.TILE,
    ROW: OperandRole.ROW,
    COL: OperandRole.COL,
    PERIODIC_COL: OperandRole.COL,  # tiled over the block's columns by XLA, outside
    SCALAR: OperandRole.SCALAR,
}
# The roles whose blocks are tiled along rows (the row block's alignment follows their dtypes).
_ROW_TILED = (OperandRole.LHS, OperandRole.TAPS, OperandRole.TILE, OperandRole.ROW)
# Each kind of stage: the piece that runs it, and the functions the file carries for it.
_PIECE_RUNNER = {
    MatmulStage: "_matmul_stage",
    ConvStage: "_conv_stage",
    PixelsMajorConvStage: "_pixels_major_conv_stage",
    VolumeConvStage: "_volume_conv_stage",
    TransposedVolumeConvStage: "_transposed_volume_conv_stage",
    Stage: "_rowwise_stage",
    ColumnReductionStage: "_rowwise_stage",
}
_PIECE: dict[type, tuple[Callable[..., Any], ...]] = {
    MatmulStage: parts.MATMUL_STAGE,
    ConvStage: parts.CONV_STAGE,
    PixelsMajorConvStage: parts.PIXELS_MAJOR_CONV_STAGE,
    VolumeConvStage: parts.VOLUME_CONV_STAGE,
    TransposedVolumeConvStage: parts.TRANSPOSED_VOLUME_CONV_STAGE,
    Stage: parts.ROWWISE_STAGE,
    ColumnReductionStage: parts.ROWWISE_STAGE,
}
# Tile-sized f32 temporaries the VMEM estimate allows for, at most, besides the blocks.
_MAX_LIVE_TEMPORARIES = 4
_GROUP_TEMPORARIES = 2  # the chunked copy and the totals of _group_totals


@dataclass
class _Operand:
    var: Var
    param: str  # its ref in the stage's body or epilogue is f"{param}_ref"
    role: OperandRole
    batched: bool
    form: tuple[Dim, ...]  # the array the stage's piece receives
    head: bool = False  # an operand of the stage's matmul or convolution (read by its head)
    periodic: bool = False  # a periodic column value (layout.PERIODIC_COL), tiled to its form


def render_kernel(plan: Plan, tunables: Tunables, precision: PrecisionChoice | None = None) -> str:
    """`precision`: the operand precision of each matmul stage, in order (None: the operands'
    own dtype at the reference's precision)."""
    return _Writer(plan, tunables, precision).render()


class _Writer:
    def __init__(
        self, plan: Plan, tunables: Tunables, precision: PrecisionChoice | None = None
    ) -> None:
        self.plan = plan
        self.tunables = tunables
        self.precision = precision
        program = plan.program
        self.symbol_names = {
            symbol: f"{program.arg_names[position]}_dim{axis}"
            for symbol, (position, axis) in program.dims.origins.items()
        }
        for symbol, position in program.dims.statics.items():  # computation() receives them
            self.symbol_names[symbol] = program.arg_names[position]
        for symbol, (base, offset) in program.dims.shifts.items():  # bases come first
            less = program.dims.less.get(symbol)
            self.symbol_names[symbol] = (
                f"{self.symbol_names[base]}"
                f"{'_minus_' + self.symbol_names[less] if less else ''}"
                f"_{'minus' if offset < 0 else 'plus'}{abs(offset)}"
            )
        self.used_symbols: set[str] = set()
        self.helpers: set[str] = set()
        self.pieces: list[tuple] = []  # the pieces the stages run, in order
        self.calls: list[str] = []  # the lines of computation() that run the stages
        self.values: dict[Var, tuple[str, tuple[Dim, ...]]] = {
            v: (name, v.shape) for name, v in zip(program.arg_names, program.inputs)
        }
        self.pending_relayouts = list(plan.relayouts)
        self.values_relaid = False  # whether computation() already explains its relayouts

    # -- the file ----------------------------------------------------------------------------
    def render(self) -> str:
        functions = [self._stage(stage) for stage in self.plan.stages]
        computation = self._computation()
        pieces = list(dict.fromkeys(self.pieces))
        if GROUP_HELPER in self.helpers:
            pieces.append(parts.GROUP_TOTALS)
        if ROW_GROUP_HELPER in self.helpers:
            pieces.append(parts.ROW_GROUP_TOTALS)
        grouped = any(r.group_widths for r in self.plan.running.values()) or any(
            isinstance(s, ConvStage) and s.row_groups for s in self.plan.stages
        )
        standard = ["functools", *(["math"] if GROUP_HELPER in self.helpers or grouped else [])]
        sections = [
            self._docstring() + "\n" + parts.imports(*standard),
            self._tunables() + "\n" + parts.VMEM_CONSTANTS,
            *parts.functions_source(*pieces),
            *functions,
            computation,
        ]
        return "\n\n".join(section.rstrip("\n") + "\n" for section in sections)

    def _docstring(self) -> str:
        lines = textwrap.wrap(
            f'"""{self.plan.family.capitalize()} kernel, written by the built-in agent of '
            "maxkernel-tui from the reference's jaxpr (no task name or id was consulted).",
            96,
        )
        lines += ["", "Plan:"]
        for stage in self.plan.stages:
            lines += textwrap.wrap(
                f"- stage {stage.number}: {self._summary(stage)}", 96, subsequent_indent="  "
            )
        if self.precision is not None and self.precision.per_matmul:
            lines += [""] + textwrap.wrap(
                f"Matmul operands: {operand_words(self.precision.per_matmul)}. "
                f"Why: {self.precision.why}.",
                96,
            )
        lines += [
            "",
            "Block sizes come from the shapes at call time, starting from the tunables below "
            "(chosen",
            "with the v5e performance model).",
            '"""',
        ]
        return "\n".join(lines)

    def _summary(self, stage: Stage) -> str:
        if isinstance(stage, MatmulStage):
            return stage.summary(running=stage in self.plan.running)
        return stage.summary()

    def _tunables(self) -> str:
        t = self.tunables
        # The `# Tunables` line comes directly before the assignments: the autotuner's contract.
        return (
            "# Each block size shrinks to a divisor of the actual size that keeps the TPU's (8, "
            "128)\n"
            "# tiling, and further while the VMEM footprint is over budget.\n"
            "# Tunables: preferred block sizes.\n"
            f"BLOCK_ROWS = {t.block_rows}\nBLOCK_COLS = {t.block_cols}\nBLOCK_DEPTH = "
            f"{t.block_depth}\n"
        )

    def _dim(self, dim: Dim) -> str:
        self.used_symbols.update(dim.symbols + dim.over)
        return dim.render(self.symbol_names)

    def _shape(self, dims: tuple[Dim, ...]) -> str:
        return ", ".join(self._dim(d) for d in dims)

    # -- one stage ---------------------------------------------------------------------------
    def _stage(self, stage: Stage) -> str:
        """The stage's body (or its head's epilogue) as a function translated from the
        reference's jaxpr; computation() runs it with its family's piece and parameters."""
        self._relayout_ready_values()
        operands, outputs = self._operands(stage), self._outputs(stage)
        ref_names = {o.var: f"{o.param}_ref" for o in operands + outputs if not o.head}
        running = self.plan.running.get(stage)
        if running is not None:
            assert isinstance(stage, MatmulStage)
            body = emit_running_body(
                stage, running, self.plan.program.dims, self.symbol_names, ref_names
            )
        else:
            body = emit_body(stage, self.plan.program.dims, self.symbol_names, ref_names)
        # A volume whose epilogue needs the whole image runs as conv.py's image per step.
        whole_volume = isinstance(stage, VolumeConvStage) and stage.whole_volume
        family: type[Stage] = ConvStage if whole_volume else type(stage)
        piece: tuple[Callable[..., Any], ...] = _PIECE[family]
        if stage.batched and stage.head is None:
            piece = parts.BATCHED_ROWWISE_STAGE
        self.pieces.append(parts.RUNNING_STAGE if running else piece)
        self.helpers |= body.helpers
        symbols = [k for k in body.keywords if k not in ("tm", "tn", "cols")]
        self.used_symbols.update(s for s, name in self.symbol_names.items() if name in symbols)
        heads, extras = [o for o in operands if o.head], [o for o in operands if not o.head]
        refs = [f"{o.param}_ref" for o in extras + outputs]
        lines, sizes, more = body.lines, [], []
        n, runner = stage.number, _PIECE_RUNNER[family]
        if isinstance(stage, (MatmulStage, ConvStage)):
            name, parameter = f"_stage{n}_epilogue", "epilogue"
            head = (
                "accumulator"
                if isinstance(stage, MatmulStage)
                else "sum of one output plane"
                if issubclass(family, VolumeConvStage)
                else "sum of a chunk of pixels of every image, (pixels * batch, out channels)"
                if family is PixelsMajorConvStage
                else "sum of one image"
            )
            what = (
                "This is its epilogue, translated equation by equation from the reference's "
                f"jaxpr, on one (tm, tn) block of the finished f32 {head}."
            )
            refs[:0] = head_sums(stage)
            more = self._head_keywords(stage, heads, extras, outputs)
            if running is not None:
                runner = "_running_matmul_stage"
                what = (
                    "This is its epilogue, translated from the reference's jaxpr: each finished "
                    "(tm, tn) block of the f32 accumulator is folded into the rows' running "
                    "statistics; `finish` runs after the last column block."
                )
                refs += [f"stat{i}_ref" for i in range(len(body.accumulators))]
                lines = [*body.step_lines, "", "def finish():", *indent(lines, 1)]
                lines += ["", "return finish"]
                more.append(f"statistics={_tuple([initial for _, initial in body.accumulators])}")
                groups = [self._dim(k.width) for k in running.group_widths if k.width]
                if groups:  # column blocks of whole groups
                    more.append(f"col_align=math.lcm(128, {', '.join(dict.fromkeys(groups))})")
        else:
            name, parameter = f"_stage{n}_body", "body"
            what = "The reference's equations, translated one by one, on one block."
            sizes = [
                f"rows={self._dim(stage.frame.row_count)}",
                f"cols={self._dim(stage.frame.cols)}",
            ]
            if body.accumulators:
                refs += [f"acc{i}_ref" for i in range(len(body.accumulators))]
                what = (
                    "Each row block adds its partial results to the f32 accumulators; `finish` "
                    "runs after the last one."
                )
                lines = [*body.step_lines, "", "def finish():", *indent(lines, 1)]
                lines += ["", "return finish"]
                accumulated = [f"({str(role)!r}, {initial})" for role, initial in body.accumulators]
                more = [f"accumulators={_tuple(accumulated)}"]
            if stage.batched:  # what follows a convolution: per image, or shared by every image
                more.append(f"batched={_tuple([str(o.batched) for o in extras + outputs])}")
        bound = ", ".join(f"{s}={s}" for s in symbols)
        # the roles as the pieces read them: text
        results = [f"({str(o.role)!r}, {dtype_source(o.var.dtype)})" for o in outputs]
        keywords = [
            *sizes,
            f"roles={_tuple([repr(str(o.role)) for o in extras])}",
            f"outputs={_tuple(results)}",
            f"{parameter}=functools.partial({name}, {bound})" if symbols else f"{parameter}={name}",
            *more,
        ]
        # A conv's block is whole images; a running epilogue's, column blocks.
        over_images = stage.batched and stage.head is None  # its blocks span every column anyway
        if stage.full_cols and not isinstance(stage, ConvStage) and not running and not over_images:
            keywords.append("full_cols=True")
        temporaries = min(body.tile_temporaries, _MAX_LIVE_TEMPORARIES) + stage.head_scratch
        if GROUP_HELPER in body.helpers:
            temporaries += _GROUP_TEMPORARIES
        row_align = str(_row_alignment(operands, outputs))
        if isinstance(stage, ConvStage) and stage.row_groups:  # blocks of whole channel groups
            widths = ", ".join(dict.fromkeys(self._dim(w) for w in stage.row_groups))
            row_align = f"math.lcm({row_align}, {widths})"
        if isinstance(stage, ConvStage) and stage.full_rows:
            keywords.append("full_rows=True")
        if not isinstance(stage, PixelsMajorConvStage):  # its blocks: pixels, every channel
            keywords.append(f"row_align={row_align}")
        keywords.append(f"temporaries={temporaries}")
        self._record_call(stage, operands, outputs, keywords, runner)
        summary = textwrap.wrap(f'"""Stage {n}: {self._summary(stage)} {what}"""', 92)
        heading = ["col", "tm", "tn", "cols"] if running is not None else ["tm", "tn"]
        keyword_params = ", ".join([*heading, *symbols])
        header = f"def {name}({', '.join(refs)}, *, {keyword_params}):"
        return "\n".join([header, *indent(summary, 1), *indent(lines, 1)]) + "\n"

    def _head_keywords(
        self,
        stage: MatmulStage | ConvStage,
        heads: list[_Operand],
        extras: list[_Operand],
        outputs: list[_Operand],
    ) -> list[str]:
        """The parameters of a matmul's or a convolution's piece besides its epilogue."""
        keywords = []
        if isinstance(stage, MatmulStage) and stage.matmul.rhs_transposed:
            keywords.append("rhs_transposed=True")
        if isinstance(stage, MatmulStage) and stage.siblings:
            keywords.append(f"siblings={len(stage.siblings)}")
        chosen = self._operand_precision(stage)
        if chosen is not None:
            keywords.append(f"operands={chosen.value!r}")
        if isinstance(stage, ConvStage):  # the image axis: of each epilogue operand and result
            if not isinstance(stage, PixelsMajorConvStage):  # its operands are per channel
                keywords.append(f"batched={_tuple([str(o.batched) for o in extras + outputs])}")
        elif stage.batched:
            keywords.append(f"batched={_tuple([str(o.batched) for o in heads + extras + outputs])}")
        if isinstance(stage, TransposedVolumeConvStage):
            keywords += [f"dilation={stage.dilation}", f"padding={stage.padding}"]
        return keywords

    def _operand_precision(self, stage: MatmulStage | ConvStage) -> OperandPrecision | None:
        """What the piece's `operands` says for this stage (pieces/blocks._mxu_dot): "bf16" casts
        f32 blocks, "bf16x3" takes them in three bf16 passes, "highest" asks for full f32
        passes (chosen, or asked by the reference); None leaves f32 blocks to Mosaic's default,
        one bf16 pass, as XLA's default precision does."""
        chosen = (
            self.precision.per_matmul[_index_of(stage.head, mxu_heads(self.plan.stages))]
            if self.precision is not None
            else None
        )
        head = stage.head
        wide = any(np.dtype(operand.dtype).itemsize > 2 for operand in (head.lhs, head.rhs))
        if chosen in (OperandPrecision.BF16, OperandPrecision.BF16X3) and wide:
            return chosen
        # bf16 operands' products are exact in one pass, and Mosaic refuses them at HIGHEST
        if wide and (chosen == OperandPrecision.HIGHEST or (chosen is None and head.precision)):
            return OperandPrecision.HIGHEST
        return None

    def _operands(self, stage: Stage) -> list[_Operand]:
        taken: set[str] = set()
        operands = []
        for head in stage.head_operands():
            param = self._unique(head.var, taken)
            operands.append(_Operand(head.var, param, head.role, head.batched, head.form, True))
        for var in stage.inputs:
            kind = stage.kinds[var]
            operands.append(
                _Operand(
                    var,
                    self._unique(var, taken),
                    _ROLE[kind.name],
                    kind.batched,
                    _form(kind, stage),
                    periodic=kind.name == PERIODIC_COL,
                )
            )
        return operands

    def _outputs(self, stage: Stage) -> list[_Operand]:
        many = len(stage.outputs) > 1
        outputs = []
        for index, var in enumerate(stage.outputs):
            kind = stage.kinds[var]
            outputs.append(
                _Operand(
                    var,
                    f"out{index}" if many else "out",
                    _ROLE[kind.name],
                    kind.batched,
                    _form(kind, stage),
                )
            )
        return outputs

    def _unique(self, var: Var, taken: set[str]) -> str:
        base = self._value_name(var)
        name, count = base, 2
        while name in taken or re.fullmatch(r"(acc|out)\d*", name):  # the kernel's own refs
            name, count = f"{base}_{count}", count + 1
        taken.add(name)
        return name

    def _value_name(self, var: Var) -> str:
        root = self.plan.storage.get(var, var)
        return self.values[root][0]

    # -- computation -------------------------------------------------------------------------
    def _record_call(
        self,
        stage: Stage,
        operands: list[_Operand],
        outputs: list[_Operand],
        keywords: list[str],
        runner: str,
    ) -> None:
        """computation()'s call of the stage's piece, with the stage's operands and parameters."""
        arguments = [
            self._tiled(o) if o.periodic else self._as_form(o.var, o.form) for o in operands
        ]
        arguments += keywords
        names = [
            f"stage{stage.number}_out{i}" if len(outputs) > 1 else f"stage{stage.number}_out"
            for i in range(len(outputs))
        ]
        call = f"    {', '.join(names)} = {runner}("
        self.calls.append(
            call + f",\n{' ' * len(call)}".join(_wrapped(arguments, 100 - len(call))) + ")"
        )
        for name, output in zip(names, outputs):
            self.values[output.var] = (name, output.form)

    def _tiled(self, operand: _Operand) -> str:
        """A periodic column value repeated over its block's columns: (1, columns)."""
        period, columns = product_of(operand.var.shape), operand.form[-1]
        times = columns.divided_by(period)
        assert times is not None  # the planner placed it where its period divides the columns
        flat = self._as_form(operand.var, (period,))
        return f"jnp.tile({flat}, {self._dim(times)}).reshape(1, {self._dim(columns)})"

    def _as_form(self, var: Var, form: tuple[Dim, ...]) -> str:
        root = self.plan.storage.get(var, var)
        name, shape = self.values[root]
        if tuple(shape) == tuple(form):
            return name

        return f"{name}.reshape({self._shape(form) if form else '()'})"

    def _relayout_ready_values(self) -> None:
        """The transposes and flips whose source is computed by now, as XLA statements in
        computation()."""
        while ready := [
            t
            for t in self.pending_relayouts
            if self.plan.storage.get(t.source, t.source) in self.values
        ]:
            for transpose in ready:
                source, result = transpose.source, transpose.outputs[0]
                name = f"relayout{len(self.plan.relayouts) - len(self.pending_relayouts)}"
                if not self.values_relaid:
                    self.calls.append(
                        "    # relayoutN: XLA lays a value out as the next stage's tiling reads it "
                        "(a transpose or a flip, no arithmetic)."
                    )
                self.values_relaid = True
                value = self._as_form(source, source.shape)
                if transpose.primitive == "rev":
                    axes = tuple(transpose.params["dimensions"])
                    self.calls.append(f"    {name} = jnp.flip({value}, {axes})")
                else:
                    permutation = tuple(transpose.params["permutation"])
                    self.calls.append(f"    {name} = jnp.transpose({value}, {permutation})")
                self.values[result] = (name, result.shape)
                self.pending_relayouts.remove(transpose)

    def _computation(self) -> str:
        self._relayout_ready_values()
        program = self.plan.program
        results = [self._as_form(o, o.shape) for o in self.plan.outputs]
        if program.output_tree.num_leaves == 1 and not program.output_tree.children():
            returned = results[0]
        else:
            returned = "(" + ", ".join(results) + ("," if len(results) == 1 else "") + ")"
        used = set(self.used_symbols)
        for symbol in reversed(program.dims.shifts):  # a shifted size needs the size it shifts
            if symbol in used:
                used.add(program.dims.shifts[symbol][0])
                if symbol in program.dims.less:
                    used.add(program.dims.less[symbol])
        bindings = [
            f"    {self.symbol_names[s]} = {program.arg_names[program.dims.origins[s][0]]}"
            f".shape[{program.dims.origins[s][1]}]"
            for s in sorted(used)
            if s in program.dims.origins
        ]
        bindings += [
            f"    {self.symbol_names[s]} = {self.symbol_names[base]}"
            f"{' - ' + self.symbol_names[program.dims.less[s]] if s in program.dims.less else ''}"
            f" {'-' if offset < 0 else '+'} {abs(offset)}"
            for s, (base, offset) in program.dims.shifts.items()
            if s in used
        ]
        return (
            "\n".join(
                [
                    f"def computation({', '.join(program.arg_names)}):",
                    *bindings,
                    *self.calls,
                    f"    return {returned}",
                ]
            )
            + "\n"
        )


def _index_of(item: object, items: list[Any]) -> int:
    """Where `item` itself (not an equal one) is in `items`."""
    return next(n for n, other in enumerate(items) if other is item)


def _form(kind: Kind, stage: Stage) -> tuple[Dim, ...]:
    """The array a stage receives for a value of this kind: 2-D, with the batch in front; a
    periodic column value repeated over the columns of its epilogue's block (one output plane
    of a volume, else the frame's)."""
    frame, one = stage.frame, Dim.const(1)
    rows, cols = frame.row_count, frame.cols
    if kind.name == PERIODIC_COL:
        if isinstance(stage, VolumeConvStage) and not stage.whole_volume:
            return (one, stage.plane_pixels)
        return (one, cols)
    lead = (frame.batch_count,) if kind.batched else ()
    return (
        lead
        + {TILE: (rows, cols), ROW: (rows, one), COL: (one, cols), SCALAR: (one, one)}[kind.name]
    )


def _row_alignment(operands: list[_Operand], outputs: list[_Operand]) -> int:
    """Sublanes per tile of the narrowest dtype among blocks tiled along rows (8 for 32-bit)."""
    itemsizes = [o.var.dtype.itemsize for o in operands + outputs if o.role in _ROW_TILED]
    return 8 * max(1, 4 // min(itemsizes, default=4))


def indent(lines: list[str], depth: int) -> list[str]:
    return [("    " * depth) + line if line else line for line in lines]


def _wrapped(items: list[str], width: int) -> list[str]:
    """Comma-separated items packed into lines of at most `width` characters."""
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + len(item) + 2 > width:
            lines.append("")
        lines[-1] += (", " if lines[-1] else "") + item
    return lines


def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
