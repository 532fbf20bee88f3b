"""The 3-D convolution stage of the kernels the built-in agent writes: a plain convolution of
a volume (NCDHW image, OIDHW kernel, stride 1, no padding) as an implicit GEMM, one output plane
per grid step. conv.py forms the taps of a plane in VMEM (lane-shifted slices of the input
planes, height * width flattened on the lanes); here the depth taps come from a ring of planes.

Output plane d reads input planes d .. d + taps_d - 1. The image stays in HBM and the kernel
copies planes itself into a ring of taps_d + 1 VMEM slots (plane p in slot p modulo taps_d + 1):
the first step of an image copies its first taps_d planes, and every step starts the copy of
the one plane the next step adds, into the slot of the plane it no longer needs, so each plane
is read from HBM once per image and block of output channels and its copy overlaps a step's
matmuls. The epilogue, translated from the reference's jaxpr, runs on the plane's f32 sum in
blocks of rows (it may reduce over a plane's rows of pixels, not across planes) into one of two
VMEM slots per result, whose copy to HBM overlaps the next step. A block of one plane cannot be
a BlockSpec (the plane axis is second-minor in (channels, depth, pixels), and a block of 1 there
is no whole (8, 128) tile for Mosaic), hence the copies; the output planes of an image run in
order ('arbitrary'). The epilogue's operands are per channel, scalars or per pixel of a plane
(BlockSpecs).

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
    image_hbm,
    taps_ref,
    *refs,
    taps_d,
    results,
    epilogue,
    sliced,
    geometry,
    chunk_rows,
    stacked,
    operands,
    sub,
):
    """Output plane pl.program_id(2) of image pl.program_id(0) for out-channel block
    pl.program_id(1), then its epilogue. image_hbm: (batch, channels, depth, height * width),
    left in HBM; taps_ref (tm, taps_d * taps_h * taps_w * channels) in (dd, dh, dw) order; refs:
    the epilogue's operands, the `results` (batch, out channels, out depth, plane pixels) left in
    HBM, the f32 sum (tm, plane pixels), the ring of taps_d + 1 input planes (input plane p in
    slot p modulo taps_d + 1) and its DMA semaphores, two slots per result and theirs."""
    others = refs[: len(refs) - 2 * results - 4]
    out_hbm = refs[len(others) : len(others) + results]
    acc_ref, ring, copied = refs[len(others) + results : len(others) + results + 3]
    *out_slots, written = refs[len(others) + results + 3 :]
    b, i, d = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    slots, last, tm = taps_d + 1, pl.num_programs(2) - 1, acc_ref.shape[0]

    def read(plane):
        slot = jax.lax.rem(plane, slots)
        return pltpu.make_async_copy(image_hbm.at[b, :, plane], ring.at[slot], copied.at[slot])

    def write(k, plane):
        slot = jax.lax.rem(plane, 2)
        target = out_hbm[k].at[b, pl.ds(i * tm, tm), plane]
        return pltpu.make_async_copy(out_slots[k].at[slot], target, written.at[k, slot])

    @pl.when(d == 0)
    def _():
        for plane in range(taps_d):
            read(plane).start()

    @pl.when(d < last)
    def _():
        read(d + taps_d).start()  # the next step's new plane, into the slot plane d - 1 left

    @pl.when(d == 0)
    def _():
        for plane in range(taps_d - 1):
            read(plane).wait()

    read(d + taps_d - 1).wait()
    planes = [ring.at[jax.lax.rem(d + dd, slots)] for dd in range(taps_d)]
    _convolve_planes(planes, taps_ref, acc_ref, geometry, chunk_rows, stacked, operands)

    @pl.when(d >= 2)
    def _():
        for k in range(results):
            write(k, d - 2).wait()  # the slot this step's results go to is free again

    slot = jax.lax.rem(d, 2)
    targets = [out_slots[k].at[slot] for k in range(results)]
    _epilogue_in_blocks(acc_ref, [*others, *targets], epilogue, sliced, sub)
    for k in range(results):
        write(k, d).start()

    @pl.when(d == last)
    def _():
        for k in range(results):
            write(k, d).wait()

    @pl.when(jnp.logical_and(d == last, d >= 1))
    def _():
        for k in range(results):
            write(k, d - 1).wait()


def _volume_operand_block(role, batched, tm, cols):
    """The BlockSpec of an epilogue operand (per channel, a scalar, or per pixel of a plane,
    the same for every plane) on the (image, out-channel block, output plane) grid: rowwise.py's
    block by role (`cols`: a plane's pixels), the image's axis in front when `batched`."""
    shape, index = _rowwise_block(role, tm, cols)

    def block(b, i, d):
        return ((b,) if batched else ()) + index(i, 0)

    return pl.BlockSpec(((None,) if batched else ()) + tuple(shape), block)


def _volume_in_specs(taps, tm, roles, batched, cols):
    """The BlockSpecs of a volume kernel's inputs: the image left in HBM (the kernel copies its
    planes), every one of the `taps` weights of an out-channel block, the epilogue's operands."""
    return [
        pl.BlockSpec(memory_space=pl.ANY),
        pl.BlockSpec((tm, taps), _volume_taps_block),
        *(_volume_operand_block(role, flag, tm, cols) for role, flag in zip(roles, batched)),
    ]


def _volume_taps_block(b, i, d):
    """Every tap's weights of out-channel block i."""
    return i, 0


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
    (tn: its pixels). roles: "row" or "scalar" for each of `others`; outputs: ("tile", dtype)
    of each result, every one with the image axis; batched, temporaries, chunk_pixels,
    patch_bytes: as conv.py's `_conv_stage`."""
    batch, channels, depth, height, width = image.shape
    rows, _, taps_d, taps_h, taps_w = kernel.shape
    out_depth, out_height, out_width = depth - taps_d + 1, height - taps_h + 1, width - taps_w + 1
    cols = out_height * out_width  # one output plane
    weights = taps_d * taps_h * taps_w * channels
    # The taps' weights in (dd, dh, dw, channel) order, the order of the patch's rows.
    taps = jnp.transpose(kernel, (0, 2, 3, 4, 1)).reshape(rows, weights)
    stacked, chunk_rows, span = _chunking(
        image.dtype,
        channels,
        weights,
        width,
        out_height,
        out_width,
        operands,
        chunk_pixels,
        patch_bytes,
    )

    def footprint(tm, sub):
        # Two buffers per pipelined block and per result's plane; the ring of input planes, the
        # plane's sum, one chunk's patch and product, the epilogue's temporaries on `sub` rows.
        blocks = _block_bytes(tm, weights, kernel.dtype)
        blocks += sum(
            _block_bytes(*_rowwise_block(role, tm, cols)[0], array.dtype)
            for role, array in zip(roles, others)
        )
        blocks += sum(_block_bytes(tm, cols, dtype) for _, dtype in outputs)
        chunk = _block_bytes(weights, span, image.dtype) + _block_bytes(tm, span, jnp.float32)
        work = temporaries * _block_bytes(sub, cols, jnp.float32)
        ring = (taps_d + 1) * _block_bytes(channels, height * width, image.dtype)
        return 2 * blocks + ring + _block_bytes(tm, cols, jnp.float32) + chunk + work

    tm, sub = _fit_conv_rows(rows, _pick_block(rows, BLOCK_ROWS, row_align), row_align, footprint)
    kernel_fn = functools.partial(
        _volume_conv_kernel,
        taps_d=taps_d,
        results=len(outputs),
        epilogue=functools.partial(epilogue, tn=cols),
        sliced=(*(role == "row" for role in roles), *(True for _ in outputs)),
        geometry=(taps_h, taps_w, width, out_height, out_width),
        chunk_rows=chunk_rows,
        stacked=stacked,
        operands=operands,
        sub=sub,
    )
    results = pl.pallas_call(
        kernel_fn,
        out_shape=[
            jax.ShapeDtypeStruct((batch, rows, out_depth, cols), dtype) for _, dtype in outputs
        ],
        grid=(batch, rows // tm, out_depth),
        in_specs=_volume_in_specs(weights, tm, roles, batched[: len(others)], cols),
        out_specs=[pl.BlockSpec(memory_space=pl.ANY) for _ in outputs],
        scratch_shapes=[
            pltpu.VMEM((tm, cols), jnp.float32),
            pltpu.VMEM((taps_d + 1, channels, height * width), image.dtype),
            pltpu.SemaphoreType.DMA((taps_d + 1,)),
            *(pltpu.VMEM((2, tm, cols), dtype) for _, dtype in outputs),
            pltpu.SemaphoreType.DMA((len(outputs), 2)),
        ],
        # Output planes in order on one core: each step prefetches the next step's new plane.
        compiler_params=_compiler_params(("parallel", "parallel", "arbitrary"), footprint(tm, sub)),
    )(image.reshape(batch, channels, depth, height * width), taps, *others)
    results = [r.reshape(batch, rows, out_depth * cols) for r in results]
    return results[0] if len(results) == 1 else results
