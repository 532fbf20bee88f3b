"""The 3-D convolution stage: a plain NCDHW x OIDHW convolution heading a stage whose frame is
(batch,) x (out channels,) x (voxels). Its piece (pieces/conv_volume.py) computes one output
plane per grid step, so the fused epilogue sees one plane at a time: it may work per voxel, per
channel, or on groups of a plane's pixels (a norm over the width), never reduce across planes.
No jax here beyond the planner's own values.
"""

from __future__ import annotations

from dataclasses import dataclass

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.layout import GROUP_ROW, ROW, SCALAR, TILE
from maxkernel_tui.agents.builtin.stages import ConvStage


@dataclass(eq=False, kw_only=True)
class VolumeConvStage(ConvStage):
    """A 3-D convolution as an implicit GEMM over depth, height and width taps: per image, block
    of output channels and output plane, the input planes it reads fetched once each (the
    window of depth taps rotates through the operands) and the plane's taps formed in VMEM."""

    @property
    def label(self) -> str:
        return "3-D convolution"

    @property
    def family(self) -> str:
        return "3-D convolution (implicit GEMM) + epilogue"

    def summary(self) -> str:
        return (
            "3-D convolution as an implicit GEMM: per image, block of output channels and output "
            "plane, the input planes under its depth taps each read from HBM once (one new plane "
            "per step), every height and width tap a lane-shifted slice of them in VMEM, one "
            f"matmul per chunk of output rows, summed in f32; fused epilogue of {len(self.eqns)} "
            "equation(s) of the reference on each plane."
        )

    @property
    def plane_pixels(self) -> Dim:
        """The pixels of one output plane: out height * out width."""
        *_, height, width = self.conv.result.shape
        return height * width

    def check_per_plane(self) -> None:
        """Raise CannotPlan when the epilogue needs more than one output plane (a reduction over
        every voxel of a channel, groups wider than a plane), a result that is not per voxel, or
        an operand that is not per channel or a scalar (the piece's BlockSpecs)."""
        for var in self.outputs:
            if self.kinds[var].name != TILE:
                raise CannotPlan(
                    "a 3-D convolution whose fused result is not per voxel: its epilogue sees one "
                    "output plane at a time"
                )
        for var in self.inputs:
            if self.kinds[var].name not in (ROW, SCALAR):
                raise CannotPlan(
                    f"a 3-D convolution's epilogue reads a {self.kinds[var].name} operand; it "
                    "takes per-channel values and scalars"
                )
        for eqn in self.eqns:
            sources = [self.kind(o) for o in eqn.inputs]
            result = self.kind(eqn.outputs[0])
            spans = any(k.name in (TILE, GROUP_ROW) for k in sources)
            if spans and result.name not in (TILE, GROUP_ROW):
                raise CannotPlan(
                    "a 3-D convolution's epilogue reduces over every voxel of a channel; the "
                    "kernel sees one output plane at a time"
                )
            for kind in (*sources, result):
                if kind.width is not None and self.plane_pixels.divided_by(kind.width) is None:
                    raise CannotPlan(
                        "a 3-D convolution's epilogue works on groups wider than an output plane"
                    )
