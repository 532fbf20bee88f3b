"""A plan -> the complete, self-contained source of a candidate kernel file.

The file declares its tunables at the top, picks every block size from the shapes it is called
with (so it runs at bench, check and unseen shapes alike), and holds one kernel function, one
`pallas_call` wrapper per stage and `computation`, which reshapes operands to the stages' 2-D
forms (free in XLA) and chains the stages.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

import numpy as np

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.epilogue import GROUP_HELPER, KernelBody, emit_body
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.layout import COL, ROW, SCALAR, TILE, Kind
from maxkernel_tui.agents.builtin.operand_precision import PrecisionChoice, operand_words
from maxkernel_tui.agents.builtin.planner import Plan
from maxkernel_tui.agents.builtin.primitives import dtype_source
from maxkernel_tui.agents.builtin.program import Var
from maxkernel_tui.agents.builtin.stages import ConvStage, MatmulStage, Stage, indent, mxu_stages
from maxkernel_tui.agents.builtin.tunables import Tunables

_ROLE = {TILE: "tile", ROW: "row", COL: "col", SCALAR: "scalar"}
# Names a stage wrapper uses for itself; an operand named like one of them gets a suffix.
_WRAPPER_LOCALS = ("rows", "cols", "depth", "batch", "tm", "tn", "tk", "footprint")
_BLOCK = {TILE: ("tm", "tn"), ROW: ("tm", "1"), COL: ("1", "tn"), SCALAR: ("1", "1")}
_ARRAY = {"tile": "rows, cols", "row": "rows, 1", "col": "1, cols", "scalar": "1, 1"}
# Tile-sized f32 temporaries the VMEM estimate allows for, at most, besides the blocks.
_MAX_LIVE_TEMPORARIES = 4
_GROUP_TEMPORARIES = 2  # the chunked copy and the totals of _group_totals


@dataclass
class _Operand:
    var: Var
    param: str  # its name in the stage wrapper; its ref in the kernel is f"{param}_ref"
    role: str  # lhs, rhs, rhs_t, image, taps, tile, row, col, scalar
    batched: bool
    form: tuple[Dim, ...]  # the array the stage receives
    block: tuple[str, ...]  # the block (rows and cols last), as source
    head: bool = False  # an operand of the stage's matmul or convolution (read by its head)


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
        for symbol, (base, offset) in program.dims.shifts.items():  # bases come first
            self.symbol_names[symbol] = (
                f"{self.symbol_names[base]}_{'minus' if offset < 0 else 'plus'}{abs(offset)}"
            )
        self.used_symbols: set[str] = set()
        self.helpers: set[str] = set()
        self.index_maps: dict[str, str] = {}
        self.calls: list[str] = []  # the lines of computation() that run the stages
        self.values: dict[Var, tuple[str, tuple[Dim, ...]]] = {
            v: (name, v.shape) for name, v in zip(program.arg_names, program.inputs)
        }
        self.pending_relayouts = list(plan.relayouts)
        self.values_relaid = False  # whether computation() already explains its relayouts

    # -- the file ----------------------------------------------------------------------------
    def render(self) -> str:
        stages = [self._stage(stage) for stage in self.plan.stages]
        computation = self._computation()
        helpers = [parts.PICK_BLOCK, parts.BLOCK_BYTES, parts.COMPILER_PARAMS]
        helpers += [
            fit
            for fit in (parts.FIT_BLOCKS, parts.FIT_ROWS)
            if any(s.fit_helper == fit for s in self.plan.stages)
        ]
        if GROUP_HELPER in self.helpers:
            helpers.append(parts.GROUP_TOTALS)
        matmuls = any(isinstance(s, MatmulStage) for s in self.plan.stages)
        if matmuls:
            helpers.append(parts.MATMUL_STAGE)
        rowwise = any(type(s) is Stage for s in self.plan.stages)
        if rowwise:
            helpers.append(parts.ROWWISE_STAGE)
        uses = {
            "functools": matmuls or rowwise or any("functools.partial" in s for s in stages),
            "math": GROUP_HELPER in self.helpers,
        }
        standard = [module for module, used in uses.items() if used]
        sections = [
            self._docstring() + "\n" + parts.imports(*standard),
            self._tunables() + "\n" + parts.VMEM_CONSTANTS,
            *helpers,
            *self.index_maps.values(),
            *stages,
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
                f"- stage {stage.number}: {stage.summary()}", 96, subsequent_indent="  "
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
        self._relayout_ready_values()
        operands = self._operands(stage)
        outputs = self._outputs(stage)
        ref_names = {o.var: f"{o.param}_ref" for o in operands + outputs if not o.head}
        body = emit_body(stage, self.plan.program.dims, self.symbol_names, ref_names)
        self.helpers |= body.helpers
        symbols = [k for k in body.keywords if k not in ("tm", "tn")]
        self.used_symbols.update(s for s, name in self.symbol_names.items() if name in symbols)
        if isinstance(stage, MatmulStage):
            return self._matmul_stage(stage, operands, outputs, body, symbols)
        if type(stage) is Stage:
            return self._rowwise_stage(stage, operands, outputs, body, symbols)
        grid = stage.grid
        for operand in operands + outputs:
            name = parts.index_map_name(operand.role, grid, operand.batched)
            self.index_maps.setdefault(
                name, parts.index_map_source(operand.role, grid, operand.batched)
            )
        kernel = self._kernel_source(stage, operands, outputs, body)
        wrapper = self._wrapper_source(stage, operands, outputs, body, symbols, grid)
        self._record_call(stage, operands, outputs, symbols)
        return kernel + "\n\n" + wrapper

    def _matmul_stage(
        self,
        stage: MatmulStage,
        operands: list[_Operand],
        outputs: list[_Operand],
        body: KernelBody,
        symbols: list[str],
    ) -> str:
        """A matmul stage: its epilogue as a function, run by the file's copy of
        pieces/matmul.py's `_matmul_stage` with this stage's parameters."""
        n = stage.number
        extras, heads = [o for o in operands if not o.head], [o for o in operands if o.head]
        refs = ["acc_ref", *(f"{o.param}_ref" for o in extras + outputs)]
        summary = textwrap.wrap(
            f'"""Stage {n}: {stage.summary()} This is its epilogue, translated equation by '
            "equation from the reference's jaxpr, on one (tm, tn) block of the finished f32 "
            'accumulator."""',
            92,
        )
        keyword_params = ", ".join(["tm", "tn", *symbols])
        epilogue = "\n".join(
            [
                f"def _stage{n}_epilogue({', '.join(refs)}, *, {keyword_params}):",
                *indent(summary, 1),
                *indent(body.lines, 1),
            ]
        )
        temporaries = min(body.tile_temporaries, _MAX_LIVE_TEMPORARIES) + stage.head_scratch
        if GROUP_HELPER in body.helpers:
            temporaries += _GROUP_TEMPORARIES
        bound = ", ".join(f"{s}={s}" for s in symbols)
        keywords = [
            f"roles={_tuple([repr(o.role) for o in extras])}",
            f"outputs={_tuple([f'({o.role!r}, {dtype_source(o.var.dtype)})' for o in outputs])}",
            f"epilogue=functools.partial(_stage{n}_epilogue, {bound})"
            if symbols
            else f"epilogue=_stage{n}_epilogue",
        ]
        if stage.matmul.rhs_transposed:
            keywords.append("rhs_transposed=True")
        chosen = self._operand_precision(stage)
        if chosen is not None:
            keywords.append(f"operands={chosen!r}")
        if stage.batched:
            keywords.append(f"batched={_tuple([str(o.batched) for o in heads + extras + outputs])}")
        if stage.full_cols:
            keywords.append("full_cols=True")
        keywords += [
            f"row_align={_row_alignment(operands, outputs)}",
            f"temporaries={temporaries}",
        ]
        self._record_call(stage, operands, outputs, [], keywords, "_matmul_stage")
        return epilogue + "\n"

    def _rowwise_stage(
        self,
        stage: Stage,
        operands: list[_Operand],
        outputs: list[_Operand],
        body: KernelBody,
        symbols: list[str],
    ) -> str:
        """A row-wise stage: its body as a function, run by the file's copy of
        pieces/rowwise.py's `_rowwise_stage` with this stage's parameters."""
        if stage.batched:  # the planner gives batch dims to matmul stages only
            raise CannotPlan("a row-wise stage with batch dimensions")
        n = stage.number
        refs = [f"{o.param}_ref" for o in operands + outputs]
        summary = textwrap.wrap(
            f'"""Stage {n}: {stage.summary()} The reference\'s equations, translated one by '
            'one, on one block."""',
            92,
        )
        keyword_params = ", ".join(["tm", "tn", *symbols])
        function = "\n".join(
            [
                f"def _stage{n}_body({', '.join(refs)}, *, {keyword_params}):",
                *indent(summary, 1),
                *indent(body.lines, 1),
            ]
        )
        temporaries = min(body.tile_temporaries, _MAX_LIVE_TEMPORARIES)
        if GROUP_HELPER in body.helpers:
            temporaries += _GROUP_TEMPORARIES
        bound = ", ".join(f"{s}={s}" for s in symbols)
        keywords = [
            f"roles={_tuple([repr(o.role) for o in operands])}",
            f"outputs={_tuple([f'({o.role!r}, {dtype_source(o.var.dtype)})' for o in outputs])}",
            f"body=functools.partial(_stage{n}_body, {bound})"
            if symbols
            else f"body=_stage{n}_body",
        ]
        if stage.full_cols:
            keywords.append("full_cols=True")
        keywords += [
            f"row_align={_row_alignment(operands, outputs)}",
            f"temporaries={temporaries}",
        ]
        self._record_call(stage, operands, outputs, [], keywords, "_rowwise_stage")
        return function + "\n"

    def _operand_precision(self, stage: MatmulStage) -> str | None:
        """What pieces/matmul.py's `operands` says for this stage: "bf16" casts f32 blocks,
        "highest" asks for full f32 passes (chosen, or asked by the reference)."""
        chosen = (
            self.precision.per_matmul[mxu_stages(self.plan.stages).index(stage)]
            if self.precision is not None
            else None
        )
        if chosen == "bf16" and np.dtype(stage.matmul.lhs.dtype).itemsize > 2:
            return "bf16"
        if chosen == "highest" or (chosen is None and stage.matmul.precision):
            return "highest"
        return None

    def _operands(self, stage: Stage) -> list[_Operand]:
        taken = set(_WRAPPER_LOCALS)
        operands = []
        for head in stage.head_operands():
            param = self._unique(head.var, taken)
            operands.append(
                _Operand(head.var, param, head.role, head.batched, head.form, head.block, True)
            )
        for var in stage.inputs:
            kind = stage.kinds[var]
            operands.append(
                _Operand(
                    var,
                    self._unique(var, taken),
                    _ROLE[kind.name],
                    kind.batched,
                    _form(kind, stage),
                    _BLOCK[kind.name],
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
                    _BLOCK[kind.name],
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

    def _kernel_source(
        self, stage: Stage, operands: list[_Operand], outputs: list[_Operand], body: KernelBody
    ) -> str:
        refs = [f"{o.param}_ref" for o in operands + outputs] + stage.scratch_refs(body)
        names = stage.kernel_keywords(body)
        keywords = f", *, {', '.join(names)}" if names else ""
        header = f"def _stage{stage.number}_kernel({', '.join(refs)}{keywords}):"
        if isinstance(stage, ConvStage) and self.precision is not None:
            chosen = self.precision.per_matmul[mxu_stages(self.plan.stages).index(stage)]
            return stage.kernel_source(header, refs, body, chosen)
        return stage.kernel_source(header, refs, body)

    def _wrapper_source(
        self,
        stage: Stage,
        operands: list[_Operand],
        outputs: list[_Operand],
        body: KernelBody,
        symbols: list[str],
        grid: tuple[str, ...],
    ) -> str:
        n = stage.number
        params = [o.param for o in operands]
        keyword_params = (["rows", "cols"] if stage.takes_sizes else []) + symbols
        keyword_list = f", *, {', '.join(keyword_params)}" if keyword_params else ""
        signature = f"def _stage{n}({', '.join(params)}{keyword_list}):"
        align = _row_alignment(operands, outputs)
        summary = textwrap.wrap(f'"""Stage {n}: {stage.summary()}"""', 92)
        lines = [signature, *indent(summary, 1), *stage.wrapper_shape_lines(params)]
        lines.append(f"    tm = _pick_block(rows, BLOCK_ROWS, {align})")
        lines.append(stage.cols_block_line(any(o.block[1] == "tn" for o in operands + outputs)))
        lines += ["", *self._footprint(stage, operands, outputs, body), ""]
        lines.append(stage.fit_line(align))
        keywords = stage.partial_keywords(body, symbols)
        kernel = (
            f"functools.partial(_stage{n}_kernel, {', '.join(keywords)})"
            if keywords
            else f"_stage{n}_kernel"
        )
        out_shapes = [
            f"jax.ShapeDtypeStruct(({'batch, ' if o.batched else ''}{_ARRAY[o.role]}), "
            f"{dtype_source(o.var.dtype)})"
            for o in outputs
        ]
        out_specs = [self._spec(o, grid) for o in outputs]
        lines += [
            "    return pl.pallas_call(",
            f"        {kernel},",
            f"        out_shape={_listed(out_shapes)},",
            f"        grid=({stage.grid_source}),",
            "        in_specs=[",
            *[f"            {self._spec(o, grid)}," for o in operands],
            "        ],",
            f"        out_specs={_listed(out_specs)},",
        ]
        scratch = stage.scratch_shapes(body)
        if scratch:
            lines.append(f"        scratch_shapes=[{scratch}],")
        footprint = f"footprint({stage.footprint_params})"
        lines += [
            f"        compiler_params=_compiler_params(({stage.semantics}), {footprint}),",
            f"    )({stage.called(params)})",
        ]
        return "\n".join(lines) + "\n"

    def _spec(self, operand: _Operand, grid: tuple[str, ...]) -> str:
        block = (("None",) if operand.batched else ()) + operand.block
        index_map = parts.index_map_name(operand.role, grid, operand.batched)
        return f"pl.BlockSpec(({', '.join(block)}), {index_map})"

    def _footprint(
        self, stage: Stage, operands: list[_Operand], outputs: list[_Operand], body: KernelBody
    ) -> list[str]:
        terms = [
            f"_block_bytes({' * '.join(o.block[:-1])}, {o.block[-1]}, {o.param}.dtype)"
            for o in operands
        ]
        terms += [
            f"_block_bytes({' * '.join(o.block[:-1])}, {o.block[-1]}, {dtype_source(o.var.dtype)})"
            for o in outputs
        ]
        temporaries = min(body.tile_temporaries, _MAX_LIVE_TEMPORARIES)
        if GROUP_HELPER in body.helpers:
            temporaries += _GROUP_TEMPORARIES
        scratch = temporaries + stage.head_scratch
        what = (
            "the f32 accumulator and " if stage.head_scratch else ""
        ) + f"~{temporaries} f32 tile temporaries"
        joined = "\n                  + ".join(terms)
        accumulators = "".join(
            f" + _block_bytes({shape[1:-1]}, jnp.float32)" for shape, _ in body.accumulators
        )
        return [
            f"    def footprint({stage.footprint_params}):",
            f"        # Two buffers per pipelined block, plus {what}.",
            f"        blocks = ({joined})",
            f"        return 2 * blocks + {scratch} * _block_bytes(tm, tn, "
            f"jnp.float32){accumulators}",
        ]

    # -- computation -------------------------------------------------------------------------
    def _record_call(
        self,
        stage: Stage,
        operands: list[_Operand],
        outputs: list[_Operand],
        symbols: list[str],
        keywords: list[str] | None = None,
        wrapper: str | None = None,
    ) -> None:
        """computation()'s call of the stage: its own wrapper, or `wrapper` with `keywords`."""
        arguments = [self._as_form(o.var, o.form) for o in operands]
        if stage.takes_sizes:
            arguments += [
                f"rows={self._dim(stage.frame.row_count)}",
                f"cols={self._dim(stage.frame.cols)}",
            ]
        arguments += [f"{s}={s}" for s in symbols] + (keywords or [])
        names = [
            f"stage{stage.number}_out{i}" if len(outputs) > 1 else f"stage{stage.number}_out"
            for i in range(len(outputs))
        ]
        call = f"    {', '.join(names)} = {wrapper or f'_stage{stage.number}'}("
        self.calls.append(
            call + f",\n{' ' * len(call)}".join(_wrapped(arguments, 100 - len(call))) + ")"
        )
        for name, output in zip(names, outputs):
            self.values[output.var] = (name, output.form)

    def _as_form(self, var: Var, form: tuple[Dim, ...]) -> str:
        root = self.plan.storage.get(var, var)
        name, shape = self.values[root]
        if tuple(shape) == tuple(form):
            return name
        return f"{name}.reshape({self._shape(form) if form else '()'})"

    def _relayout_ready_values(self) -> None:
        """The transposes whose source is computed by now, as XLA statements in computation()."""
        while ready := [
            t
            for t in self.pending_relayouts
            if self.plan.storage.get(t.source, t.source) in self.values
        ]:
            for transpose in ready:
                source, result = transpose.source, transpose.outputs[0]
                name = f"relayout{len(self.plan.relayouts) - len(self.pending_relayouts)}"
                permutation = tuple(transpose.params["permutation"])
                if not self.values_relaid:
                    self.calls.append(
                        "    # relayoutN: XLA lays a value out as the next stage's tiling reads it "
                        "(a transpose, no arithmetic)."
                    )
                self.values_relaid = True
                self.calls.append(
                    f"    {name} = jnp.transpose({self._as_form(source, source.shape)}, "
                    f"{permutation})"
                )
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
        bindings = [
            f"    {self.symbol_names[s]} = {program.arg_names[program.dims.origins[s][0]]}"
            f".shape[{program.dims.origins[s][1]}]"
            for s in sorted(used)
            if s in program.dims.origins
        ]
        bindings += [
            f"    {self.symbol_names[s]} = {self.symbol_names[base]} {'-' if offset < 0 else '+'} "
            f"{abs(offset)}"
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


def _form(kind: Kind, stage: Stage) -> tuple[Dim, ...]:
    """The array a stage receives for a value of this kind: 2-D, with the batch in front."""
    frame, one = stage.frame, Dim.const(1)
    rows, cols = frame.row_count, frame.cols
    lead = (frame.batch_count,) if kind.batched else ()
    return (
        lead
        + {TILE: (rows, cols), ROW: (rows, one), COL: (one, cols), SCALAR: (one, one)}[kind.name]
    )


def _row_alignment(operands: list[_Operand], outputs: list[_Operand]) -> int:
    """Sublanes per tile of the narrowest dtype among blocks tiled along rows (8 for 32-bit)."""
    itemsizes = [o.var.dtype.itemsize for o in operands + outputs if o.block[-2] == "tm"]
    return 8 * max(1, 4 // min(itemsizes, default=4))


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


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
