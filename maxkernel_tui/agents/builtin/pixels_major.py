"""A 2-D convolution's program written pixels-major (pieces/conv_pixels.py): the convolution's
result becomes a (pixels * batch, out channels) matrix, XLA's own layout for a convolution's
result, and every value the program derives from it is rewritten in that frame, so the planner
sees a matmul-like head with its per-channel epilogue (columns), batch statistics (reductions
over rows: column reductions) and row-wise work across channels, as for a matmul. The program's
results go back to NCHW by a reshape and a transpose, which XLA makes a bitcast: the layout it
chooses for such a result is the one the kernel wrote (benchmarks/results/conv_output_layout.md).

The rewrite refuses (None) wherever a value keeps a structure the matrix has no place for: a
value per image and channel (an instance norm's statistics), a per-pixel value not over every
image and pixel, a tile of the result's shape read from the program's inputs (NCHW: XLA would
copy it), any primitive other than element-wise ones, broadcasts, reshapes of channel vectors
and reductions over every pixel or every channel, and a batch that does not fill the 128 lanes
of the (channels, batch) tiles the piece reads. No jax here beyond the planner's own values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.layout import product_of
from maxkernel_tui.agents.builtin.primitives import (
    REDUCTIONS,
    VIEWS,
    is_elementwise,
    is_plain_conv,
)
from maxkernel_tui.agents.builtin.program import Eqn, Operand, Program, Var
from maxkernel_tui.agents.builtin.stages import ConvStage

LANES = 128
# The parameter that marks the rewritten convolution equation for the planner.
PIXELS_MAJOR = "pixels_major"
# The result's axes (batch, channels, height, width) in the matrix's rows, as XLA lays them out.
_ROW_AXES = (2, 3, 0)


@dataclass(eq=False, kw_only=True)
class PixelsMajorConvStage(ConvStage):
    """A plain 2-D convolution written (out height * out width * batch, out channels): the image
    laid out (height, width, channels, batch) by XLA, every tap of a pixel a whole tile, one
    matmul per chunk of output pixels of every image; its frame is a matmul's."""

    @property
    def label(self) -> str:
        return "pixels-major convolution"

    @property
    def family(self) -> str:
        return "convolution written pixels-major + epilogue"

    def summary(self) -> str:
        return (
            "convolution written pixels-major (XLA's own layout for its result, so the "
            "transpose back to NCHW is a bitcast): the image laid out (height, width, channels, "
            "batch) by XLA, every tap of an output pixel a whole (channels, batch) tile in VMEM, "
            "one matmul per chunk of output pixels of every image, summed in f32; fused "
            f"epilogue of {len(self.eqns)} equation(s) of the reference on (pixels * batch, "
            "out channels) blocks."
        )


class _Refused(Exception):
    """The program keeps a structure the pixels-major matrix has no place for."""


@dataclass
class _Rewrite:
    result: Var  # the convolution's NCHW result
    rows: Dim  # out height * out width * batch
    rows_bench: int
    made: dict[Var, Var] = field(default_factory=dict)  # a value -> its pixels-major form
    eqns: list[Eqn] = field(default_factory=list)

    # -- what a value holds, by its axes of the result (batch, channels, height, width) ------
    def content(self, var: Var) -> tuple[bool, bool] | None:
        """(per pixel, per channel) for a value spanning the result's axes or none of them
        (size 1); None for anything else (a per-image value, a per-row one, another size)."""
        shape = self.result.shape
        if len(var.shape) == 4:
            present = [d == r for d, r in zip(var.shape, shape, strict=True)]
            if not all(p or d.is_one() for p, d in zip(present, var.shape, strict=True)):
                return None
            pixel = [present[a] for a in _ROW_AXES]
            if any(pixel) and not all(pixel):
                return None
            return all(pixel), present[1]
        kept = [d for d in var.shape if not d.is_one()]
        if not kept:
            return False, False
        if kept == [shape[1]]:
            return False, True
        if kept == [shape[0], shape[2], shape[3]] and len(var.shape) == 3:
            return True, False
        return None

    def matrix_shape(self, var: Var) -> tuple[tuple[Dim, ...], tuple[int, ...]]:
        """The pixels-major form of `var`'s shape (and at bench): a 4-D value a (rows, cols)
        matrix; a vector of channels or of pixels 1-D; a scalar as it is."""
        content = self.content(var)
        if content is None:
            raise _Refused(f"a value of shape {var.bench_shape}")
        pixel, channel = content
        one, channels = Dim.const(1), self.result.shape[1]
        if len(var.shape) == 4:
            return (
                (self.rows if pixel else one, channels if channel else one),
                (self.rows_bench if pixel else 1, self.result.bench_shape[1] if channel else 1),
            )
        if pixel:
            return (self.rows,), (self.rows_bench,)
        return var.shape, var.bench_shape

    # -- operands ------------------------------------------------------------------------------
    def operand(self, operand: Operand) -> Operand:
        """An equation's operand in the pixels-major program: a rewritten value's new form; a
        value computed elsewhere as it is, reshaped where it is a 4-D vector of channels."""
        if not isinstance(operand, Var):
            return operand
        if operand in self.made:
            return self.made[operand]
        content = self.content(operand)
        if content is None or content[0]:
            raise _Refused(f"a value of shape {operand.bench_shape} read beside the result")
        if len(operand.shape) != 4:
            return operand
        return self.view(operand)

    def view(self, var: Var) -> Var:
        """A 4-D vector of channels computed from parameters, reshaped to its matrix form."""
        shape, bench = self.matrix_shape(var)
        made = Var(shape, var.dtype, bench)
        self.eqns.append(_reshape(var, made))
        return made

    def output(self, var: Var) -> Var:
        shape, bench = self.matrix_shape(var)
        made = Var(shape, var.dtype, bench)
        self.made[var] = made
        return made


def pixels_major_program(program: Program) -> Program | None:
    """`program` with its one plain 2-D convolution written pixels-major, and everything derived
    from its result in that frame; None where the module docstring's conditions fail."""
    convs = [e for e in program.eqns if e.primitive == "conv_general_dilated"]
    if len(convs) != 1 or not is_plain_conv(convs[0].params):
        return None
    (conv,) = convs
    result = conv.outputs[0]
    if len(result.shape) != 4 or result.bench_shape[0] % LANES:
        return None
    rows = product_of([result.shape[a] for a in _ROW_AXES])
    rewrite = _Rewrite(result, rows, math.prod(result.bench_shape[a] for a in _ROW_AXES))
    try:
        for eqn in program.eqns:
            _rewrite(eqn, conv, rewrite)
        outputs = [_back(o, rewrite) for o in program.outputs]
    except _Refused:
        return None
    return Program(
        program.arg_names,
        program.inputs,
        rewrite.eqns,
        outputs,
        program.dims,
        program.output_tree,
        program.constants,
        program.untranslatable,
    )


def _rewrite(eqn: Eqn, conv: Eqn, rewrite: _Rewrite) -> None:
    """Append `eqn` to the rewritten program, in the pixels-major frame where it reads or makes
    a value of the result's axes."""
    if eqn is conv:
        params = {**conv.params, PIXELS_MAJOR: True}
        rewrite.eqns.append(
            Eqn(conv.primitive, conv.inputs, [rewrite.output(conv.outputs[0])], params)
        )
        return
    reads = any(isinstance(o, Var) and o in rewrite.made for o in eqn.inputs)
    makes_tile = any(len(o.shape) == 4 and rewrite.content(o) == (True, True) for o in eqn.outputs)
    if not reads and not makes_tile:
        rewrite.eqns.append(eqn)  # parameters' own arithmetic (a bias reshaped) stays as it is
        return
    inputs = [rewrite.operand(o) for o in eqn.inputs]
    (result,) = eqn.outputs
    if is_elementwise(eqn.primitive, len(eqn.inputs)):
        rewrite.eqns.append(Eqn(eqn.primitive, inputs, [rewrite.output(result)], eqn.params))
    elif eqn.primitive in REDUCTIONS:
        rewrite.eqns.append(_reduction(eqn, inputs, rewrite))
    elif eqn.primitive in VIEWS:
        rewrite.eqns.append(_view(eqn, inputs, rewrite))
    else:
        raise _Refused(f"`{eqn.primitive}` on the convolution's result")


def _reduction(eqn: Eqn, inputs: list[Operand], rewrite: _Rewrite) -> Eqn:
    """A reduction over every pixel (of every image), every channel, or both."""
    (source,), (new_source,) = eqn.inputs, inputs
    assert isinstance(source, Var) and isinstance(new_source, Var)
    if len(source.shape) != 4:
        raise _Refused("a reduction of a vector derived from the result")
    axes = set(eqn.params["axes"])
    pixels = {a for a in _ROW_AXES if not source.shape[a].is_one()}
    if pixels & axes and not pixels <= axes:
        raise _Refused("a reduction over some of the images and pixels")
    new_axes = tuple(
        axis for axis, reduced in enumerate([bool(axes & set(_ROW_AXES)), 1 in axes]) if reduced
    )
    made = rewrite.output(eqn.outputs[0])
    kept = tuple(d for axis, d in enumerate(new_source.shape) if axis not in new_axes)
    if kept != made.shape:
        raise _Refused(f"a reduction to {eqn.outputs[0].bench_shape}")
    return Eqn(eqn.primitive, inputs, [made], {**eqn.params, "axes": new_axes})


def _view(eqn: Eqn, inputs: list[Operand], rewrite: _Rewrite) -> Eqn:
    """A reshape or broadcast into or out of the result's axes, in the matrix's terms: a vector
    of channels moves along the columns, a vector of pixels along the rows."""
    (source,) = inputs
    assert isinstance(source, Var)
    made = rewrite.output(eqn.outputs[0])
    if eqn.primitive != "broadcast_in_dim":
        if _kept(source) != _kept(made):
            raise _Refused(f"a reshape of {source.bench_shape} to {made.bench_shape}")
        return _reshape(source, made)
    if len(source.shape) not in (0, 2):  # a vector: along the axis its values run along
        vector = _kept(source)
        if vector == [rewrite.result.shape[1]] and not made.shape[1].is_one():
            dimensions: tuple[int, ...] = (1,)
        elif vector == [rewrite.rows] and not made.shape[0].is_one():
            dimensions = (0,)
        else:
            raise _Refused(f"a broadcast of {source.bench_shape}")
        if len(source.shape) != 1:
            flat = Var(tuple(vector), source.dtype, tuple(d for d in source.bench_shape if d != 1))
            rewrite.eqns.append(_reshape(source, flat))
            source = flat
    else:
        dimensions = tuple(range(len(source.shape)))
    params = {**eqn.params, "shape": made.bench_shape, "broadcast_dimensions": dimensions}
    return Eqn("broadcast_in_dim", [source], [made], params)


def _reshape(source: Var, made: Var) -> Eqn:
    return Eqn("reshape", [source], [made], {"new_sizes": made.bench_shape, "dimensions": None})


def _kept(var: Var) -> list[Dim]:
    return [d for d in var.shape if not d.is_one()]


def _back(operand: Operand, rewrite: _Rewrite) -> Operand:
    """A result of the program in its own shape again: a matrix reshaped to (out height, out
    width, batch, out channels) and transposed to NCHW (a bitcast in XLA's layout for it); a
    vector or scalar reshaped."""
    if not isinstance(operand, Var) or operand not in rewrite.made:
        return operand
    made = rewrite.made[operand]
    if len(operand.shape) == 4 and rewrite.content(operand) == (True, True):
        shape = tuple(rewrite.result.shape[a] for a in (*_ROW_AXES, 1))
        bench = tuple(rewrite.result.bench_shape[a] for a in (*_ROW_AXES, 1))
        rows_first = Var(shape, made.dtype, bench)
        rewrite.eqns.append(_reshape(made, rows_first))
        rewrite.eqns.append(
            Eqn("transpose", [rows_first], [operand], {"permutation": (2, 3, 0, 1)})
        )
        return operand
    if rewrite.content(operand) == (True, False) or rewrite.content(operand) == (True, True):
        raise _Refused("a result per pixel that is not a whole tile")
    if made.shape == operand.shape:
        return made
    rewrite.eqns.append(_reshape(made, operand))
    return operand
