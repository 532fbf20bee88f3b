"""Batch statistics of a convolution's result summed image by image first (a program rewrite).

A batch norm after a convolution sums each channel over every image and pixel twice: the mean,
then the squared deviations from it. Planned as written, each sum is a kernel of its own that
reads the whole result back from HBM (34k: 520 MB each). The convolution's kernel holds each
image's result whole in VMEM, so it can sum each image there instead:

- `sum(x, images and pixels)` becomes `sum(p, images)` with `p = sum(x, pixels)` per image;
- `sum((x - c)**2, images and pixels)`, for any per-channel `c` (the mean), becomes
  `sum(q + n * (m - c)**2, images)` with the image's own mean `m = p / n` and its squared
  deviations from it `q = sum((x - m)**2, pixels)`, `n` its pixel count: the same sum exactly
  (within an image the deviations from its own mean add up to zero), and as well conditioned as
  the reference's (Chan et al.'s pairwise update).

The per-image values are (images, channels): the statistics' kernels read those, not the
result. Only `reduce_sum` over exactly the images and every pixel, keeping the channels, is
rewritten; the squared deviations only where nothing else reads them. No jax here beyond the
planner's own values.
"""

from __future__ import annotations

import math

import numpy as np

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.primitives import is_plain_conv
from maxkernel_tui.agents.builtin.program import Eqn, Literal, Operand, Program, Var


def per_image_statistics(program: Program) -> Program | None:
    """`program` with its convolution results' batch sums taken per image first (module
    docstring); None where there is none to rewrite."""
    results = [
        e.outputs[0]
        for e in program.eqns
        if e.primitive == "conv_general_dilated" and is_plain_conv(e.params)
    ]
    shapes = {r.shape for r in results if len(r.shape) >= 4}
    if not shapes:
        return None
    rewrite = _Rewrite(program, shapes)
    for eqn in program.eqns:
        rewrite.visit(eqn)
    if not rewrite.changed:
        return None
    return Program(
        program.arg_names,
        program.inputs,
        _live(rewrite.eqns, program.outputs),
        program.outputs,
        program.dims,
        program.output_tree,
        program.constants,
        program.untranslatable,
    )


class _Rewrite:
    def __init__(self, program: Program, shapes: set[tuple]) -> None:
        self.program = program
        self.shapes = shapes  # the convolutions' result shapes: (images, channels, pixels...)
        self.eqns: list[Eqn] = []
        self.producer: dict[Var, Eqn] = {}
        self.readers: dict[Var, int] = {}
        for eqn in program.eqns:
            for operand in eqn.inputs:
                if isinstance(operand, Var):
                    self.readers[operand] = self.readers.get(operand, 0) + 1
        # an image tile -> its sums per image and channel, (images, channels, 1, ...)
        self.sums: dict[Var, Var] = {}
        self.changed = False

    def visit(self, eqn: Eqn) -> None:
        for output in eqn.outputs:
            self.producer[output] = eqn
        source = eqn.inputs[0] if eqn.inputs else None
        if eqn.primitive != "reduce_sum" or not self._is_batch_sum(eqn, source):
            self.eqns.append(eqn)
            return
        assert isinstance(source, Var)
        (total,) = eqn.outputs
        centered = self._squared_deviation(source)
        if centered is None:
            per_image = self._per_image_sums(source)
        else:
            per_image = self._per_image_spread(*centered)
        # (images, channels, 1, ...) summed over the same axes: the images and unit pixels
        self._emit("reduce_sum", [per_image], total, eqn.params)
        self.changed = True

    # -- what is rewritten ---------------------------------------------------------------------
    def _is_batch_sum(self, eqn: Eqn, source: Operand | None) -> bool:
        """A sum of an image tile over its images and every pixel, keeping the channels."""
        if not isinstance(source, Var) or source.shape not in self.shapes:
            return False
        (total,) = eqn.outputs
        rank = len(source.shape)
        axes = set(eqn.params["axes"])
        return axes == {0, *range(2, rank)} and tuple(total.shape) == (source.shape[1],)

    def _squared_deviation(self, var: Var) -> tuple[Var, Var] | None:
        """(tile, center) where `var` is (tile - center)**2 for a per-channel center, read only
        by the sum being rewritten (so the square and the difference can go)."""
        square = self.producer.get(var)
        if square is None or self.readers.get(var) != 1:
            return None
        squares = square.primitive == "square" or (
            square.primitive == "integer_pow" and square.params.get("y") == 2
        )
        doubled = square.primitive == "mul" and square.inputs[0] is square.inputs[1]
        difference = square.inputs[0]
        if not (squares or doubled) or not isinstance(difference, Var):
            return None
        sub = self.producer.get(difference)
        if sub is None or sub.primitive != "sub":
            return None
        if self.readers.get(difference) != (2 if doubled else 1):
            return None  # the deviations are read elsewhere: they stay
        tile, center = sub.inputs
        if not isinstance(tile, Var) or tile.shape != var.shape or not isinstance(center, Var):
            return None
        return (tile, center) if self._per_channel(center, tile) else None

    @staticmethod
    def _per_channel(center: Var, tile: Var) -> bool:
        """Whether `center` holds one value per channel, laid along the tile's channel axis."""
        if len(center.shape) != len(tile.shape):
            return False
        return all(
            d == tile.shape[1] if axis == 1 else d.is_one() for axis, d in enumerate(center.shape)
        )

    # -- the per-image values ------------------------------------------------------------------
    def _per_image_sums(self, tile: Var) -> Var:
        """The tile summed over each image's pixels, (images, channels, 1, ...)."""
        if tile not in self.sums:
            images, channels = tile.shape[:2]
            flat = self._var((images, channels), tile)
            self._emit("reduce_sum", [tile], flat, {"axes": tuple(range(2, len(tile.shape)))})
            self.sums[tile] = self._reshaped(flat, tile)
        return self.sums[tile]

    def _per_image_spread(self, tile: Var, center: Var) -> Var:
        """Each image's squared deviations from `center`, (images, channels, 1, ...): those from
        its own mean, plus its pixel count times its mean's squared distance from `center`."""
        count = self._pixel_count(tile)
        sums = self._per_image_sums(tile)
        means = self._binary("div", sums, count)
        deviations = self._binary("sub", tile, means)
        squares = self._power(deviations)
        own = self._var(sums.shape[:2], tile)
        self._emit("reduce_sum", [squares], own, {"axes": tuple(range(2, len(tile.shape)))})
        offsets = self._power(self._binary("sub", means, center))
        return self._binary("add", self._reshaped(own, tile), self._binary("mul", offsets, count))

    def _pixel_count(self, tile: Var) -> Literal:
        bench, check = (
            math.prod(int(self.program.dims.values(d)[trace]) for d in tile.shape[2:])
            for trace in (0, 1)
        )
        return Literal(float(bench), float(check), np.dtype(tile.dtype))

    # -- equations -----------------------------------------------------------------------------
    def _var(self, shape: tuple, like: Var) -> Var:
        bench = tuple(int(self.program.dims.values(d)[0]) for d in shape)
        return Var(tuple(shape), like.dtype, bench)

    def _reshaped(self, flat: Var, tile: Var) -> Var:
        """(images, channels) as (images, channels, 1, ...), to broadcast against the tile."""
        one = Dim.const(1)
        made = self._var((*flat.shape, *(one for _ in tile.shape[2:])), tile)
        params = {"new_sizes": made.bench_shape, "dimensions": None}
        self._emit("reshape", [flat], made, params)
        return made

    def _binary(self, primitive: str, lhs: Var, rhs: Operand) -> Var:
        shape = lhs.shape
        if isinstance(rhs, Var) and len(rhs.shape) == len(shape):
            shape = tuple(b if a.is_one() else a for a, b in zip(shape, rhs.shape, strict=True))
        made = self._var(shape, lhs)
        self._emit(primitive, [lhs, rhs], made, {})
        return made

    def _power(self, var: Var) -> Var:
        made = self._var(var.shape, var)
        self._emit("integer_pow", [var], made, {"y": 2})
        return made

    def _emit(self, primitive: str, inputs: list[Operand], output: Var, params: dict) -> None:
        self.eqns.append(Eqn(primitive, inputs, [output], params))


def _live(eqns: list[Eqn], outputs: list[Operand]) -> list[Eqn]:
    """`eqns` less those whose results nothing reads (the squares the rewrite replaced)."""
    needed = {id(o) for o in outputs if isinstance(o, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(eqns):
        if any(id(o) in needed for o in eqn.outputs):
            kept.append(eqn)
            needed.update(id(o) for o in eqn.inputs if isinstance(o, Var))
    return kept[::-1]
