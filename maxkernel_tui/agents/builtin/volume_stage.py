"""The 3-D convolution stage: a plain NCDHW x OIDHW convolution heading a stage whose frame is
(batch,) x (out channels,) x (voxels). Its piece (pieces/conv_volume.py) computes one output
plane per grid step, so the fused epilogue sees one plane at a time: it may work per voxel, per
channel, or on groups of a plane's pixels (a norm over the width). An epilogue that reduces
across planes (a group norm's statistics, a mean of the image) makes it a whole-volume stage:
conv.py's piece, one image per grid step with every output plane's sum in VMEM, the epilogue
then seeing the whole image as a 2-D convolution's does. No jax here beyond the planner's own
values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from maxkernel_tui.agents.builtin.dims import Dim
from maxkernel_tui.agents.builtin.errors import CannotPlan
from maxkernel_tui.agents.builtin.layout import GROUP_ROW, PERIODIC_COL, ROW, SCALAR, TILE
from maxkernel_tui.agents.builtin.primitives import REDUCTIONS
from maxkernel_tui.agents.builtin.stages import ConvStage

# The most VMEM a whole-volume stage's image, f32 sum and epilogue temporaries may take at
# bench shapes, for its smallest block of output channels: a third of v5e's and v6e's 128 MiB,
# what generated kernels budget their blocks to (pieces/blocks.py).
WHOLE_VOLUME_BYTES = 48 * 2**20
# The epilogue's f32 temporaries of the sum's size, counted for that check.
WHOLE_VOLUME_TEMPORARIES = 3


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
        if self.whole_volume:
            return (
                "3-D convolution as an implicit GEMM over a whole image per step: per image and "
                "block of output channels, the image read from HBM once (its planes side by side "
                "on the lanes), every tap a lane-shifted slice of it in VMEM, one matmul per "
                "output plane and chunk of its rows, summed in f32 for every plane; fused "
                f"epilogue of {len(self.eqns)} equation(s) of the reference on the whole image."
            )
        return (
            "3-D convolution as an implicit GEMM: per image, block of output channels and output "
            "plane, the input planes under its depth taps each read from HBM once (one new plane "
            "per step), every height and width tap a lane-shifted slice of them in VMEM, one "
            f"matmul per chunk of output rows, summed in f32; fused epilogue of {len(self.eqns)} "
            "equation(s) of the reference on each plane."
        )

    @property
    def whole_volume(self) -> bool:
        """Whether its epilogue reduces across output planes: to per-channel, per-group,
        per-voxel-column or per-image values, or over groups of columns wider than a plane."""
        for eqn in self.eqns:
            if eqn.primitive not in REDUCTIONS or eqn.reduces_unit_axes_only:
                continue
            result = self.kinds[eqn.outputs[0]]
            if result.name == GROUP_ROW and result.width is not None:
                if self.plane_pixels.divided_by(result.width) is None:
                    return True
            elif result.name != TILE:
                return True
        return False

    @property
    def plane_pixels(self) -> Dim:
        """The pixels of one output plane: out height * out width."""
        *_, height, width = self.conv.result.shape
        return height * width

    def check_whole_volume_fits(self) -> None:
        """Raise CannotPlan when a whole image does not fit VMEM at bench shapes: its input
        planes twice (pipelined), its f32 sum and the epilogue's temporaries for the fewest
        output channels a block may take (8, or every channel when the epilogue reduces over
        them or groups them)."""
        _, channels, *voxels = self.conv.result.bench_shape
        rows = channels if self.full_rows or self.row_groups else min(channels, 8)
        image = self.conv.image
        image_bytes = math.prod(image.bench_shape[1:]) * np.dtype(image.dtype).itemsize
        sums = rows * math.prod(voxels) * 4 * (1 + WHOLE_VOLUME_TEMPORARIES)
        if 2 * image_bytes + sums > WHOLE_VOLUME_BYTES:
            raise CannotPlan(
                "a 3-D convolution whose epilogue reduces across output planes needs a whole "
                f"image in VMEM: {(2 * image_bytes + sums) / 2**20:.0f} MiB for {rows} output "
                f"channel(s) of {math.prod(voxels)} voxels, over {WHOLE_VOLUME_BYTES // 2**20} MiB"
            )

    def check_per_plane(self) -> None:
        """Raise CannotPlan when the epilogue needs more than one output plane (a reduction over
        every voxel of a channel, groups wider than a plane), a result that is not per voxel, or
        an operand that is not per channel, a scalar or periodic within a plane (the piece's
        BlockSpecs)."""
        for var in self.outputs:
            if self.kinds[var].name != TILE:
                raise CannotPlan(
                    "a 3-D convolution whose fused result is not per voxel: its epilogue sees one "
                    "output plane at a time"
                )
        for var in self.inputs:
            if self.kinds[var].name not in (ROW, SCALAR, PERIODIC_COL):
                raise CannotPlan(
                    f"a 3-D convolution's epilogue reads a {self.kinds[var].name} operand; it "
                    "takes per-channel values, scalars and values per position in a plane's rows "
                    "or pixels"
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


@dataclass(eq=False, kw_only=True)
class TransposedVolumeConvStage(VolumeConvStage):
    """A transposed 3-D convolution (the image dilated by a stride, padded; ConvTranspose3d) as
    one plain convolution per phase of the output (pieces/conv_transposed.py): the dilation's
    zeros are never multiplied, and the phases are interleaved in VMEM into whole output planes,
    so the epilogue sees one plane at a time as a plain 3-D convolution's does."""

    @property
    def label(self) -> str:
        return "transposed 3-D convolution"

    @property
    def family(self) -> str:
        return "transposed 3-D convolution (implicit GEMM per phase) + epilogue"

    @property
    def dilation(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.conv.eqn.params["lhs_dilation"])

    @property
    def padding(self) -> tuple[tuple[int, int], ...]:
        return tuple((int(lo), int(hi)) for lo, hi in self.conv.eqn.params["padding"])

    @property
    def whole_volume(self) -> bool:
        return False  # its epilogue sees one output plane at a time (check_per_plane)

    def summary(self) -> str:
        strides = "x".join(str(s) for s in self.dilation)
        return (
            f"transposed 3-D convolution (stride {strides}) as an implicit GEMM per output phase: "
            "per image, block of output channels and depth index, the input planes under its "
            "depth taps each read from HBM once (one new plane per step), each phase's taps "
            "lane-shifted slices of them in VMEM (the dilation's zeros never multiplied), one "
            "matmul per phase and chunk of rows, the width phases interleaved in VMEM into whole "
            f"output planes; fused epilogue of {len(self.eqns)} equation(s) of the reference on "
            "each plane."
        )
