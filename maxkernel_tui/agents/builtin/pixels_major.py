"""The 2-D convolution stage written pixels-major (pieces/conv_pixels.py): XLA's layout for a
convolution's result, so the transpose back to NCHW is a bitcast where an NCHW-writing kernel
is followed by a copy of its whole output (benchmarks/results/conv_output_layout.md). The
planner makes a plain convolution stage one when its epilogue reads nothing but the sum,
per-channel values and scalars, element by element (the piece hands it (pixels * batch, out
channels) chunks, the transpose of the NCHW stage's blocks), when no later stage reads what it
writes (a kernel reading it NCHW would pay the copy back), and when its images fill the lanes
of the (channels, batch) tiles the piece reads. No jax here beyond the planner's own values.
"""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.agents.builtin.layout import ROW, SCALAR, TILE, same_layout
from maxkernel_tui.agents.builtin.primitives import is_elementwise
from maxkernel_tui.agents.builtin.stages import ConvStage, Stage

LANES = 128


@dataclass(eq=False, kw_only=True)
class PixelsMajorConvStage(ConvStage):
    """A plain 2-D convolution written (out height, out width, batch, out channels): the image
    laid out (height, width, channels, batch) by XLA, every tap of a pixel a whole tile, one
    matmul per chunk of output pixels of every image."""

    @property
    def family(self) -> str:
        return "convolution written pixels-major + element-wise epilogue"

    def summary(self) -> str:
        return (
            "convolution written pixels-major (XLA's own layout for its result, so the "
            "transpose back to NCHW is a bitcast): the image laid out (height, width, channels, "
            "batch) by XLA, every tap of an output pixel a whole (channels, batch) tile in VMEM, "
            "one matmul per chunk of output pixels of every image, summed in f32; fused "
            f"element-wise epilogue of {len(self.eqns)} equation(s) of the reference."
        )


def write_pixels_major(stages: list[Stage]) -> list[Stage]:
    """`stages` with every plain convolution stage that can be written pixels-major made one."""
    return [
        PixelsMajorConvStage(
            number=s.number,
            frame=s.frame,
            eqns=s.eqns,
            kinds=s.kinds,
            inputs=s.inputs,
            outputs=s.outputs,
            conv=s.conv,
        )
        if type(s) is ConvStage and _can_write_pixels_major(s, stages)
        else s
        for s in stages
    ]


def _can_write_pixels_major(stage: ConvStage, stages: list[Stage]) -> bool:
    """The module docstring's conditions."""
    if stage.conv.image.bench_shape[0] % LANES:
        return False  # the images would leave lanes of every tile empty
    for kind in stage.kinds.values():
        placed = kind.batched if kind.name == TILE else kind.name in (ROW, SCALAR)
        if not placed or (kind.name != TILE and kind.batched):
            return False  # a per-image row or a column: no place in (pixels * batch, channels)
    if any(stage.kinds[v].name == TILE for v in stage.inputs):
        return False  # a tile read from HBM is NCHW: XLA would copy it to the pixels' layout
    for eqn in stage.eqns:
        viewed = same_layout(stage.kind(eqn.inputs[0]), stage.kinds[eqn.outputs[0]])
        if not (is_elementwise(eqn.primitive, len(eqn.inputs)) or viewed):
            return False  # a reduction or a broadcast to a block's shape, NCHW-oriented
    written = set(stage.outputs)
    return not any(
        written & {*other.inputs, *other.reads} for other in stages if other is not stage
    )
