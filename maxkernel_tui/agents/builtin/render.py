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
from maxkernel_tui.agents.builtin.layout import COL, ROW, SCALAR, TILE, Kind
from maxkernel_tui.agents.builtin.planner import Plan, Stage
from maxkernel_tui.agents.builtin.primitives import dtype_source
from maxkernel_tui.agents.builtin.program import Var
from maxkernel_tui.agents.builtin.tunables import Tunables

_ROLE = {TILE: "tile", ROW: "row", COL: "col", SCALAR: "scalar"}
# Names a stage wrapper uses for itself; an operand named like one of them gets a suffix.
_WRAPPER_LOCALS = ("rows", "cols", "depth", "batch", "tm", "tn", "tk", "footprint")
_BLOCK = {TILE: ("tm", "tn"), ROW: ("tm", "1"), COL: ("1", "tn"), SCALAR: ("1", "1")}
_ARRAY = {"tile": "rows, cols", "row": "rows, 1", "col": "1, cols", "scalar": "1, 1"}
_HEAD_ROLES = (
    "lhs",
    "rhs",
    "rhs_t",
    "image",
    "taps",
)  # operands of the matmul or convolution itself
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


def render_kernel(plan: Plan, tunables: Tunables) -> str:
    return _Writer(plan, tunables).render()


class _Writer:
    def __init__(self, plan: Plan, tunables: Tunables) -> None:
        self.plan = plan
        self.tunables = tunables
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
        self.values: dict[int, tuple[str, tuple[Dim, ...]]] = {
            id(v): (name, v.shape) for name, v in zip(program.arg_names, program.inputs)
        }
        self.pending_relayouts = list(plan.relayouts)
        self.values_relaid = False  # whether computation() already explains its relayouts

    # -- the file ----------------------------------------------------------------------------
    def render(self) -> str:
        stages = [self._stage(stage) for stage in self.plan.stages]
        computation = self._computation()
        helpers = [parts.PICK_BLOCK, parts.BLOCK_BYTES, parts.COMPILER_PARAMS]
        if any(s.matmul for s in self.plan.stages):
            helpers.append(parts.FIT_BLOCKS)
        if any(s.matmul is None for s in self.plan.stages):
            helpers.append(parts.FIT_ROWS)
        if GROUP_HELPER in self.helpers:
            helpers.append(parts.GROUP_TOTALS)
        standard = (["functools"] if any("functools.partial" in s for s in stages) else []) + (
            ["math"] if GROUP_HELPER in self.helpers else []
        )
        sections = [
            self._docstring() + "\n" + parts.imports(standard),
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
                f"- stage {stage.number}: {_stage_summary(stage)}", 96, subsequent_indent="  "
            )
        lines += [
            "",
            "Block sizes come from the shapes at call time, starting from the tunables below (chosen",
            "with the v5e performance model).",
            '"""',
        ]
        return "\n".join(lines)

    def _tunables(self) -> str:
        t = self.tunables
        # The `# Tunables` line comes directly before the assignments: the autotuner's contract.
        return (
            "# Each block size shrinks to a divisor of the actual size that keeps the TPU's (8, 128)\n"
            "# tiling, and further while the VMEM footprint is over budget.\n"
            "# Tunables: preferred block sizes.\n"
            f"BLOCK_ROWS = {t.block_rows}\nBLOCK_COLS = {t.block_cols}\nBLOCK_DEPTH = {t.block_depth}\n"
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
        ref_names = {
            id(o.var): f"{o.param}_ref" for o in operands + outputs if o.role not in _HEAD_ROLES
        }
        body = emit_body(stage, self.plan.program.dims, self.symbol_names, ref_names)
        self.helpers |= body.helpers
        grid = _grid(stage)
        for operand in operands + outputs:
            name = parts.index_map_name(operand.role, grid, operand.batched)
            self.index_maps.setdefault(
                name, parts.index_map_source(operand.role, grid, operand.batched)
            )
        symbols = [k for k in body.keywords if k not in ("tm", "tn")]
        self.used_symbols.update(s for s, name in self.symbol_names.items() if name in symbols)
        kernel = self._kernel_source(stage, operands, outputs, body)
        wrapper = self._wrapper_source(stage, operands, outputs, body, symbols, grid)
        self._record_call(stage, operands, outputs, symbols)
        return kernel + "\n\n" + wrapper

    def _operands(self, stage: Stage) -> list[_Operand]:
        taken = set(_WRAPPER_LOCALS)
        operands = []
        frame = stage.frame
        batch = (frame.batch_count,) if stage.batched else ()
        if stage.matmul:
            matmul = stage.matmul
            rows, cols, depth = frame.row_count, frame.cols, matmul.depth
            operands.append(
                _Operand(
                    matmul.lhs,
                    self._unique(matmul.lhs, taken),
                    "lhs",
                    stage.batched,
                    batch + (rows, depth),
                    ("tm", "tk"),
                )
            )
            role, form, block = (
                ("rhs_t", (cols, depth), ("tn", "tk"))
                if matmul.rhs_transposed
                else ("rhs", (depth, cols), ("tk", "tn"))
            )
            operands.append(
                _Operand(
                    matmul.rhs,
                    self._unique(matmul.rhs, taken),
                    role,
                    stage.batched,
                    batch + form,
                    block,
                )
            )
        if stage.conv:
            conv = stage.conv
            # The wrapper passes the image as column-shifted copies and the kernel tap-major.
            operands.append(
                _Operand(
                    conv.image,
                    self._unique(conv.image, taken),
                    "image",
                    True,
                    conv.image.shape,
                    ("taps_w", "channels", "height * out_width"),
                )
            )
            operands.append(
                _Operand(
                    conv.kernel,
                    self._unique(conv.kernel, taken),
                    "taps",
                    False,
                    conv.kernel.shape,
                    ("taps_h * taps_w", "tm", "channels"),
                )
            )
        for var in stage.inputs:
            kind = stage.kinds[id(var)]
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
            kind = stage.kinds[id(var)]
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
        root = self.plan.storage.get(id(var), var)
        return self.values[id(root)][0]

    def _kernel_source(
        self, stage: Stage, operands: list[_Operand], outputs: list[_Operand], body: KernelBody
    ) -> str:
        scratch = (
            ["acc_ref"] if stage.matmul else [f"acc{n}_ref" for n in range(len(body.accumulators))]
        )
        refs = [f"{o.param}_ref" for o in operands + outputs] + scratch
        names = body.keywords
        if stage.conv:  # its body always needs the block sizes and the tap geometry
            names = [
                "tm",
                "tn",
                *(k for k in body.keywords if k not in ("tm", "tn")),
                "taps_h",
                "taps_w",
                "row_len",
            ]
        keywords = f", *, {', '.join(names)}" if names else ""
        header = f"def _stage{stage.number}_kernel({', '.join(refs)}{keywords}):"
        if stage.across_rows:
            starts = [
                f"        acc{n}_ref[...] = jnp.full({shape}, {initial}, jnp.float32)"
                for n, (shape, initial) in enumerate(body.accumulators)
            ]
            return (
                f"{header}\n"
                f'    """Stage {stage.number}: reductions over rows. Row blocks are the innermost grid axis; '
                'each adds\n    its partial result to f32 scratch, read once the last row block is in."""\n'
                "    i = pl.program_id(1)\n\n"
                "    @pl.when(i == 0)\n"
                "    def _start():\n"
                + "\n".join(starts)
                + "\n\n"
                + "\n".join(_indent(body.step_lines, 1))
                + "\n\n"
                "    @pl.when(i == pl.num_programs(1) - 1)\n"
                "    def _finish():\n" + "\n".join(_indent(body.lines, 2)) + "\n"
            )
        if stage.conv:
            return _conv_kernel_source(header, stage.number, refs[0], refs[1], body.lines)
        if stage.matmul is None:
            reach = "row block, all columns" if stage.full_cols else "tm, tn"
            doc = (
                f'    """Stage {stage.number}: the reference\'s equations, translated one by one, on one\n'
                f'    ({reach}) block per grid step."""'
            )
            return "\n".join([header, doc, *_indent(body.lines, 1)]) + "\n"
        depth_axis = 3 if stage.batched else 2
        lhs, rhs = f"{operands[0].param}_ref[...]", f"{operands[1].param}_ref[...]"
        precision = ", precision=jax.lax.Precision.HIGHEST" if stage.matmul.precision else ""
        why = ""
        if stage.matmul.precision:
            why += "    # The reference asks for full f32 precision (Precision.HIGHEST).\n"
        if stage.matmul.rhs_transposed:
            why += (
                "    # The weight is stored (cols, depth): contract both blocks on their last axis rather\n"
                "    # than transpose the weight in HBM.\n"
            )
            dot = (
                f"jax.lax.dot_general(\n        {lhs}, {rhs}, (((1,), (1,)), ((), ())),\n"
                f"        preferred_element_type=jnp.float32{precision})"
            )
        else:
            dot = f"jnp.dot(\n        {lhs}, {rhs},\n        preferred_element_type=jnp.float32{precision})"
        return (
            f"{header}\n"
            f'    """Stage {stage.number}: accumulate the matmul over depth steps, then run the epilogue."""\n'
            f"    k = pl.program_id({depth_axis})\n\n"
            "    @pl.when(k == 0)\n"
            "    def _zero_accumulator():\n"
            "        acc_ref[...] = jnp.zeros_like(acc_ref)\n\n"
            f"{why}"
            f"    acc_ref[...] += {dot}\n\n"
            "    # The epilogue, translated equation by equation from the reference's jaxpr, runs once\n"
            "    # per output block on the finished f32 accumulator.\n"
            f"    @pl.when(k == pl.num_programs({depth_axis}) - 1)\n"
            "    def _epilogue():\n" + "\n".join(_indent(body.lines, 2)) + "\n"
        )

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
        params = ", ".join(o.param for o in operands)
        keyword_params = (
            ["rows", "cols"] if stage.matmul is None and stage.conv is None else []
        ) + symbols
        signature = f"def _stage{n}({params}{', *, ' + ', '.join(keyword_params) if keyword_params else ''}):"
        align = _row_alignment(operands, outputs)
        summary = textwrap.wrap(f'"""Stage {n}: {_stage_summary(stage)}"""', 92)
        lines = [signature, *_indent(summary, 1)]
        if stage.matmul:
            lhs, rhs = operands[0], operands[1]
            lines.append(f"    {'batch, ' if stage.batched else ''}rows, depth = {lhs.param}.shape")
            lines.append(f"    cols = {rhs.param}.shape[{-2 if rhs.role == 'rhs_t' else -1}]")
        if stage.conv:
            lines += _conv_layout_lines(operands[0].param, operands[1].param)
        lines.append(f"    tm = _pick_block(rows, BLOCK_ROWS, {align})")
        if stage.conv:
            lines.append("    tn = cols  # whole images: the taps reach across rows of pixels")
        elif stage.full_cols:
            lines.append(
                "    tn = cols  # the epilogue reduces over columns: a block spans every column"
            )
        elif not any(o.block[1] == "tn" for o in operands + outputs):
            lines.append("    tn = cols  # no block is tiled along columns")
        else:
            lines.append("    tn = _pick_block(cols, BLOCK_COLS, 128)")
        if stage.matmul:
            lines.append("    tk = _pick_block(depth, BLOCK_DEPTH, 128)")
        lines += ["", *self._footprint(stage, operands, outputs, body), ""]
        if stage.matmul:
            lines.append(f"    tm, tk = _fit_blocks(rows, depth, tm, tk, {align}, footprint)")
            fit_args, semantics = "tm, tk", '"parallel", "parallel", "arbitrary"'
            grid_source = "rows // tm, cols // tn, depth // tk"
            if stage.batched:
                semantics, grid_source = '"parallel", ' + semantics, "batch, " + grid_source
        else:
            lines.append(f"    tm = _fit_rows(rows, tm, {align}, footprint)")
            fit_args, semantics, grid_source = (
                "tm",
                '"parallel", "parallel"',
                "rows // tm, cols // tn",
            )
            if stage.across_rows:
                semantics, grid_source = '"parallel", "arbitrary"', "cols // tn, rows // tm"
            if stage.conv:
                semantics, grid_source = (
                    '"parallel", "parallel", "parallel"',
                    "batch, rows // tm, cols // tn",
                )
        keywords = [f"{k}={k}" for k in body.keywords]
        if stage.conv:
            keywords = [f"{k}={k}" for k in ("tm", "tn", *symbols)] + [
                "taps_h=taps_h",
                "taps_w=taps_w",
                "row_len=out_width",
            ]
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
            f"        grid=({grid_source}),",
            "        in_specs=[",
            *[f"            {self._spec(o, grid)}," for o in operands],
            "        ],",
            f"        out_specs={_listed(out_specs)},",
        ]
        if stage.matmul:
            lines.append("        scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)],")
        elif body.accumulators:
            shapes = ", ".join(
                f"pltpu.VMEM({shape}, jnp.float32)" for shape, _ in body.accumulators
            )
            lines.append(f"        scratch_shapes=[{shapes}],")
        called = (
            ", ".join(["shifted", "taps", *(o.param for o in operands[2:])])
            if stage.conv
            else params
        )
        lines += [
            f"        compiler_params=_compiler_params(({semantics}), footprint({fit_args})),",
            f"    )({called})",
        ]
        return "\n".join(lines) + "\n"

    def _spec(self, operand: _Operand, grid: tuple[str, ...]) -> str:
        block = (("None",) if operand.batched else ()) + operand.block
        return f"pl.BlockSpec(({', '.join(block)}), {parts.index_map_name(operand.role, grid, operand.batched)})"

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
        # A convolution's sum lives in the body, beside a shifted view of the image.
        scratch = temporaries + (1 if stage.matmul else 0) + (2 if stage.conv else 0)
        what = (
            "the f32 accumulator and " if stage.matmul or stage.conv else ""
        ) + f"~{temporaries} f32 tile temporaries"
        joined = "\n                  + ".join(terms)
        accumulators = "".join(
            f" + _block_bytes({shape[1:-1]}, jnp.float32)" for shape, _ in body.accumulators
        )
        return [
            f"    def footprint({'tm, tk' if stage.matmul else 'tm'}):",
            f"        # Two buffers per pipelined block, plus {what}.",
            f"        blocks = ({joined})",
            f"        return 2 * blocks + {scratch} * _block_bytes(tm, tn, jnp.float32){accumulators}",
        ]

    # -- computation -------------------------------------------------------------------------
    def _record_call(
        self, stage: Stage, operands: list[_Operand], outputs: list[_Operand], symbols: list[str]
    ) -> None:
        arguments = [self._as_form(o.var, o.form) for o in operands]
        if stage.matmul is None and stage.conv is None:
            arguments += [
                f"rows={self._dim(stage.frame.row_count)}",
                f"cols={self._dim(stage.frame.cols)}",
            ]
        arguments += [f"{s}={s}" for s in symbols]
        names = [
            f"stage{stage.number}_out{i}" if len(outputs) > 1 else f"stage{stage.number}_out"
            for i in range(len(outputs))
        ]
        call = f"    {', '.join(names)} = _stage{stage.number}("
        self.calls.append(
            call + f",\n{' ' * len(call)}".join(_wrapped(arguments, 100 - len(call))) + ")"
        )
        for name, output in zip(names, outputs):
            self.values[id(output.var)] = (name, output.form)

    def _as_form(self, var: Var, form: tuple[Dim, ...]) -> str:
        root = self.plan.storage.get(id(var), var)
        name, shape = self.values[id(root)]
        if tuple(shape) == tuple(form):
            return name
        return f"{name}.reshape({self._shape(form) if form else '()'})"

    def _relayout_ready_values(self) -> None:
        """The transposes whose source is computed by now, as XLA statements in computation()."""
        ready = True
        while ready:
            ready = [
                t
                for t in self.pending_relayouts
                if id(self.plan.storage.get(id(t.inputs[0]), t.inputs[0])) in self.values
            ]
            for transpose in ready:
                source, result = transpose.inputs[0], transpose.outputs[0]
                name = f"relayout{len(self.plan.relayouts) - len(self.pending_relayouts)}"
                permutation = tuple(transpose.params["permutation"])
                if not self.values_relaid:
                    self.calls.append(
                        "    # relayoutN: XLA lays a value out as the next stage's tiling reads it "
                        "(a transpose, no arithmetic)."
                    )
                self.values_relaid = True
                self.calls.append(
                    f"    {name} = jnp.transpose({self._as_form(source, source.shape)}, {permutation})"
                )
                self.values[id(result)] = (name, result.shape)
                self.pending_relayouts.remove(transpose)

    def _computation(self) -> str:
        self._relayout_ready_values()
        program = self.plan.program
        results = [self._as_form(o, o.shape) for o in program.outputs]
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
            f"    {self.symbol_names[s]} = {self.symbol_names[base]} {'-' if offset < 0 else '+'} {abs(offset)}"
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


def _grid(stage: Stage) -> tuple[str, ...]:
    if stage.conv:
        return parts.IMAGE_GRID
    if stage.matmul:
        return parts.BATCHED_GRID if stage.batched else parts.MATMUL_GRID
    return parts.COLUMN_REDUCTION_GRID if stage.across_rows else parts.ELEMENTWISE_GRID


def _stage_summary(stage: Stage) -> str:
    epilogue = f"{len(stage.eqns)} equation(s) of the reference"
    if stage.conv:
        return (
            f"convolution as an implicit GEMM: per image and block of output channels, one matmul per tap "
            f"on a lane-shifted view of the image, summed in f32; fused epilogue of {epilogue}."
        )
    if stage.across_rows:
        return f"column reductions ({epilogue}) over (tm, tn) blocks, row blocks innermost and 'arbitrary'."
    if stage.matmul is None:
        reach = "whole rows" if stage.full_cols else "(rows, cols) tiles"
        return f"element-wise/row-wise body of {epilogue} over {reach}."
    matmul = stage.matmul
    weight = (
        "a (cols, depth) weight, contracted on its last axis"
        if matmul.rhs_transposed
        else "a (depth, cols) weight"
    )
    batch = "batched " if stage.batched else ""
    reach = (
        "; a block spans every column since the epilogue reduces over them"
        if stage.full_cols
        else ""
    )
    return (
        f"{batch}matmul of {np.dtype(matmul.lhs.dtype).name} rows with {weight}, f32 accumulator in VMEM, "
        f"depth last and 'arbitrary'; fused epilogue of {epilogue}{reach}."
    )


def _wrapped(items: list[str], width: int) -> list[str]:
    """Comma-separated items packed into lines of at most `width` characters."""
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + len(item) + 2 > width:
            lines.append("")
        lines[-1] += (", " if lines[-1] else "") + item
    return lines


def _indent(lines: list[str], depth: int) -> list[str]:
    return [("    " * depth) + line for line in lines]


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"


def _conv_layout_lines(image: str, kernel: str) -> list[str]:
    """The convolution wrapper's shapes, and the layouts XLA prepares for the kernel."""
    return [
        f"    batch, channels, height, width = {image}.shape",
        f"    rows, _, taps_h, taps_w = {kernel}.shape",
        "    out_height, out_width = height - taps_h + 1, width - taps_w + 1",
        "    cols = out_height * out_width",
        "    # XLA lays out taps_w column-shifted copies of the image, rows of pixels flattened: tap",
        "    # (dh, dw) of output pixel p is then pixel p + dh * out_width of copy dw, a lane offset.",
        f"    shifted = jnp.stack([{image}[:, :, :, dw:dw + out_width] for dw in range(taps_w)], axis=1)",
        "    shifted = shifted.reshape(batch, taps_w, channels, height * out_width)",
        f"    taps = jnp.transpose({kernel}, (2, 3, 0, 1)).reshape(taps_h * taps_w, rows, channels)",
    ]


def _conv_kernel_source(
    header: str, number: int, image_ref: str, taps_ref: str, epilogue: list[str]
) -> str:
    return (
        f"{header}\n"
        f'    """Stage {number}: the convolution of one image for a block of output channels, as an\n'
        "    implicit GEMM: each tap's (tm, channels) weights times the image's channels seen at the\n"
        '    tap\'s lane offset, summed in f32; then the epilogue."""\n'
        "    acc = jnp.zeros((tm, tn), jnp.float32)\n"
        "    for dh in range(taps_h):  # unrolled while tracing: taps_h * taps_w matmuls\n"
        "        for dw in range(taps_w):\n"
        f"            view = {image_ref}[dw, :, pl.ds(dh * row_len, tn)]\n"
        f"            acc += jnp.dot({taps_ref}[dh * taps_w + dw], view, preferred_element_type=jnp.float32)\n\n"
        "    # The epilogue, translated equation by equation from the reference's jaxpr.\n"
        + "\n".join(_indent(epilogue, 1))
        + "\n"
    )
