"""The 3-D convolution stage of the kernels the built-in agent writes: a plain convolution of
a volume (NCDHW image, OIDHW kernel, stride 1, no padding) as an implicit GEMM, one output plane
per grid step. conv.py forms the taps of a plane in VMEM (lane-shifted slices of the input
planes, flattened height * width on the lanes); here the depth taps come from the grid.

Output plane d reads input planes d .. d + taps_d - 1. The image goes in as `taps_d` operands of
one (channels, height * width) plane each, and operand k holds whichever plane of that window
is k modulo taps_d: from one output plane to the next only one operand's plane changes (the
plane leaving the window is replaced by the one entering it), so the pipeline fetches one plane
per step and each plane is read from HBM once per image and block of output channels. Inside,
step d orders the operands by depth (d modulo taps_d is a trace-time branch) and calls conv.py's
`_convolve_planes`; the epilogue, translated from the reference's jaxpr, runs on the plane's f32
sum in blocks of rows, so it may reduce over a plane's rows of pixels but not across planes.

render.py copies these functions into each kernel file unchanged (with conv.py's, blocks.py's
and rowwise.py's helpers and the file's BLOCK_* tunables) and calls `_volume_conv_stage`;
tests call them directly in interpret mode. Imports jax.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_tui.agents.builtin.pieces.blocks import _block_bytes, _compiler_params, _pick_block
from maxkernel_tui.agents.builtin.pieces.conv import (
    _chunking,
    _convolve_planes,
    _epilogue_in_blocks,
    _fit_conv_rows,
)
from maxkernel_tui.agents.builtin.pieces.rowwise import _rowwise_block

# Preferred block of output channels: the generated file defines its own under `# Tunables`.
BLOCK_ROWS = 512


def _volume_conv_kernel(
    *refs, taps_d, epilogue, sliced, geometry, chunk_rows, stacked, operands, sub
):
    """Output plane pl.program_id(2) of one image for a block of output channels, then its
    epilogue. refs: `taps_d` input planes (channels, height * width), operand k holding the
    window's plane that is k modulo taps_d; the taps (tm, taps_d * taps_h * taps_w * channels)
    in (dd, dh, dw) order; the epilogue's operands and outputs; the f32 sum (tm, plane pixels)."""
    planes, (taps_ref, *refs) = refs[:taps_d], refs[taps_d:]
    *epilogue_refs, acc_ref = refs
    turn = jax.lax.rem(pl.program_id(2), taps_d)
    for first in range(taps_d):  # the operand holding the window's first plane

        @pl.when(turn == first)
        def _(first=first):
            ordered = [planes[(first + dd) % taps_d] for dd in range(taps_d)]
            _convolve_planes(ordered, taps_ref, acc_ref, geometry, chunk_rows, stacked, operands)

    _epilogue_in_blocks(acc_ref, epilogue_refs, epilogue, sliced, sub)


def _window_plane(k, taps_d, b, i, d):
    """Operand k's input plane at output plane d: the plane of d .. d + taps_d - 1 that is k
    modulo taps_d."""
    return b, 0, d + jax.lax.rem(k + taps_d - jax.lax.rem(d, taps_d), taps_d), 0


def _volume_taps_block(b, i, d):
    """Every tap's weights of out-channel block i."""
    return i, 0


def _volume_role_block(role, batched, tm, tn):
    """The BlockSpec of an epilogue operand or a result on the (image, out-channel block, output
    plane) grid: rowwise.py's block by role, a tile or a column having the plane's pixels (its
    plane axis squeezed), with the image's axis in front when `batched`."""
    shape, index = _rowwise_block(role, tm, tn)
    per_plane = role in ("tile", "col")
    if per_plane:
        shape = (shape[0], None, shape[1])

    def block(b, i, d):
        row, col = index(i, 0)
        return ((b,) if batched else ()) + ((row, d, col) if per_plane else (row, col))

    return pl.BlockSpec(((None,) if batched else ()) + tuple(shape), block)


def _volume_conv_stage(
    image,
    kernel,
    *others,
    roles,
    outputs,
    batched,
    epilogue,
    operands=None,
    row_align=8,
    temporaries=2,
    chunk_pixels=4096,
    patch_bytes=4 * 2**20,
):
    """One 3-D convolution stage: image (batch, channels, depth, height, width) with kernel (out
    channels, channels, taps_d, taps_h, taps_w) into (batch, out channels, out voxels), then
    `epilogue(acc, *other_refs, *out_refs, tm=, tn=)` on blocks of rows of one output plane
    (tn: its pixels). roles, outputs, batched, temporaries, chunk_pixels, patch_bytes: as
    conv.py's `_conv_stage`; a tile or column operand is read a plane at a time and every
    result is a tile (the epilogue sees one plane)."""
    batch, channels, depth, height, width = image.shape
    rows, _, taps_d, taps_h, taps_w = kernel.shape
    out_depth, out_height, out_width = depth - taps_d + 1, height - taps_h + 1, width - taps_w + 1
    cols = out_height * out_width  # one output plane
    weights = taps_d * taps_h * taps_w * channels
    # The taps' weights in (dd, dh, dw, channel) order, the order of the patch's rows.
    taps = jnp.transpose(kernel, (0, 2, 3, 4, 1)).reshape(rows, weights)
    plane_weights = taps_h * taps_w * channels
    stacked, chunk_rows, span = _chunking(
        image.dtype,
        channels,
        taps_d * plane_weights,
        width,
        out_height,
        out_width,
        operands,
        chunk_pixels,
        patch_bytes,
    )
    others_outputs = [*((role, array.dtype) for role, array in zip(roles, others)), *outputs]

    def footprint(tm, sub):
        # Two buffers per pipelined block; the plane's sum, one chunk's patch and product, and
        # the epilogue's f32 temporaries on a block of `sub` rows.
        blocks = taps_d * _block_bytes(channels, height * width, image.dtype)
        blocks += _block_bytes(tm, weights, kernel.dtype)
        blocks += sum(
            _block_bytes(*_rowwise_block(role, tm, cols)[0], dtype)
            for role, dtype in others_outputs
        )
        chunk = _block_bytes(weights, span, image.dtype) + _block_bytes(tm, span, jnp.float32)
        work = temporaries * _block_bytes(sub, cols, jnp.float32)
        return 2 * blocks + _block_bytes(tm, cols, jnp.float32) + chunk + work

    tm, sub = _fit_conv_rows(rows, _pick_block(rows, BLOCK_ROWS, row_align), row_align, footprint)
    planes = {"tile": (rows, out_depth, cols), "col": (1, out_depth, cols)}
    in_flags, out_flags = batched[: len(others)], batched[len(others) :]
    by_plane = [
        array.reshape(*array.shape[:-1], *planes[role][1:]) if role in planes else array
        for role, array in zip(roles, others)
    ]
    kernel_fn = functools.partial(
        _volume_conv_kernel,
        taps_d=taps_d,
        epilogue=functools.partial(epilogue, tn=cols),
        sliced=tuple(role in ("tile", "row") for role, _ in others_outputs),
        geometry=(taps_h, taps_w, width, out_height, out_width),
        chunk_rows=chunk_rows,
        stacked=stacked,
        operands=operands,
        sub=sub,
    )
    plane_spec = (None, channels, None, height * width)
    results = pl.pallas_call(
        kernel_fn,
        out_shape=[
            jax.ShapeDtypeStruct((batch, *planes[role]) if flag else planes[role], dtype)
            for (role, dtype), flag in zip(outputs, out_flags)
        ],
        grid=(batch, rows // tm, out_depth),
        in_specs=[
            *(
                pl.BlockSpec(plane_spec, functools.partial(_window_plane, k, taps_d))
                for k in range(taps_d)
            ),
            pl.BlockSpec((tm, weights), _volume_taps_block),
            *(_volume_role_block(role, flag, tm, cols) for role, flag in zip(roles, in_flags)),
        ],
        out_specs=[
            _volume_role_block(role, flag, tm, cols) for (role, _), flag in zip(outputs, out_flags)
        ],
        scratch_shapes=[pltpu.VMEM((tm, cols), jnp.float32)],
        # Output planes in order on one core: consecutive steps share all but one input plane.
        compiler_params=_compiler_params(("parallel", "parallel", "arbitrary"), footprint(tm, sub)),
    )(*[image.reshape(batch, channels, depth, height * width)] * taps_d, taps, *by_plane)
    results = [r.reshape(*r.shape[:-2], out_depth * cols) for r in results]
    return results[0] if len(results) == 1 else results
